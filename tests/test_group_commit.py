"""Group commit: items submitted together are handled as one batch in one thread, each caller gets its own result,
and a batch that fails fails every one of its items and no other."""

from __future__ import annotations

import asyncio
import threading

import pytest

from edsb.group_commit import GroupCommit


def test_items_submitted_together_form_one_batch_and_get_their_own_results() -> None:
    batches: list[list[int]] = []
    threads: set[str] = set()

    def square(batch: list[int]) -> list[int]:
        batches.append(batch)
        threads.add(threading.current_thread().name)
        return [item * item for item in batch]

    commit = GroupCommit(square, thread_name="test-commit")

    async def submit() -> tuple[list[int], int]:
        together = await asyncio.gather(*(commit.submit(i) for i in range(10)))
        return together, await commit.submit(11)

    assert asyncio.run(submit()) == ([i * i for i in range(10)], 121)
    assert batches == [list(range(10)), [11]] and commit.batches == 2
    assert len(threads) == 1 and threads.pop().startswith("test-commit")
    commit.close()
    assert asyncio.run(submit())[1] == 121  # a closed commit starts its thread again when used
    commit.close()


def test_a_failing_batch_fails_each_of_its_items_and_only_those() -> None:
    def refuse_sevens(batch: list[int]) -> list[int]:
        if 7 in batch:
            raise OSError(28, "No space left on device")
        return batch

    commit = GroupCommit(refuse_sevens, thread_name="test-commit")

    async def submit() -> tuple[list[int | BaseException], int]:
        first = await asyncio.gather(*(commit.submit(i) for i in (5, 6, 7)), return_exceptions=True)
        return first, await commit.submit(8)

    first, later = asyncio.run(submit())
    assert all(isinstance(outcome, OSError) and outcome.errno == 28 for outcome in first)
    assert later == 8 and commit.batches == 1
    commit.close()


def test_a_handler_answering_the_wrong_number_of_results_is_an_error_not_a_hang() -> None:
    commit = GroupCommit(lambda batch: batch[:-1], thread_name="test-commit")

    async def submit() -> list[int]:
        return await asyncio.gather(*(commit.submit(i) for i in range(3)))

    with pytest.raises(ValueError, match="2 results for 3 items"):
        asyncio.run(asyncio.wait_for(submit(), 10))
    commit.close()


def test_items_of_a_loop_that_shuts_down_are_never_handled_by_a_later_loop() -> None:
    handled: list[int] = []
    release, busy = threading.Event(), threading.Event()

    def slow(batch: list[int]) -> list[int]:
        busy.set()
        release.wait(10)
        handled.extend(batch)
        return batch

    commit = GroupCommit(slow, thread_name="test-commit")

    async def interrupted() -> None:
        first = asyncio.ensure_future(commit.submit(1))
        assert await asyncio.to_thread(busy.wait, 10)  # item 1 is in the thread; item 2 waits for the next batch
        second = asyncio.ensure_future(commit.submit(2))
        await asyncio.sleep(0)  # one turn of the loop: submit(2) runs up to its wait
        assert [item for item, _ in commit._pending] == [2]
        first.cancel()
        second.cancel()
        for task in asyncio.all_tasks() - {asyncio.current_task()}:
            task.cancel()  # as asyncio.run does when its main coroutine ends

    asyncio.run(interrupted())
    release.set()
    assert asyncio.run(commit.submit(3)) == 3
    commit.close()
    assert handled == [1, 3]  # item 2 belonged to the loop that shut down
