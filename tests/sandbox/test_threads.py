"""Threads are bounded per run by the kernel, whatever the uid: a flood is the model's execution error naming the
cap, a run beside it is untouched, and a fork the kernel refuses never kills the template."""

from __future__ import annotations

import errno
import os
import sys
import threading

import pytest

from edsb.sandbox import CodeContext, CodeError, SandboxLimits, SandboxPool, worker
from edsb.sandbox.kernel import TASK_LIMIT, host_support
from tests.support.kernel_sandbox import require_kernel_sandbox

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the kernel sandbox is Linux's")

FLOOD = """def parse_event():
    import threading
    threading.stack_size(1 << 16)
    hold = threading.Event()
    for _ in range(3000):
        threading.Thread(target=hold.wait, daemon=True).start()
"""

COUNT = """def parse_event():
    import threading
    threading.stack_size(1 << 16)  # small stacks: the count, not the memory limit, stops it
    hold, started = threading.Event(), 0
    try:
        for _ in range(500):
            threading.Thread(target=hold.wait, daemon=True).start()
            started += 1
    except RuntimeError:
        pass
    hold.set()
    get_character('A').set_target_action(str(started))
"""

POOL_OF_FOUR = """def parse_event():
    from concurrent.futures import ThreadPoolExecutor
    import time
    with ThreadPoolExecutor(4) as pool:
        total = sum(pool.map(lambda x: time.sleep(0.2) or x, range(8)))
    get_character('A').set_target_action(str(total))
"""


# A pool of 32 workers, all alive at once (the barrier), each doing a little numpy: honest code the default limits
# must leave room for (1 GiB of address space, the cap on threads).
POOL_OF_32 = """def parse_event():
    from concurrent.futures import ThreadPoolExecutor
    import threading
    import numpy as np
    together = threading.Barrier(32, timeout=8)
    def work(i):
        together.wait()
        return float((np.eye(8) @ np.full(8, i)).sum())
    with ThreadPoolExecutor(max_workers=32) as pool:
        total = sum(pool.map(work, range(32)))
    get_character('A').set_target_action(str(int(total)))
"""

# Every byte of the address space taken first, then one thread: its stack has no room.
STARVED = """def parse_event():
    import threading
    thread = threading.Thread(target=len, args=((),))
    held = []
    try:
        while True:
            held.append(bytearray(1 << 20))
    except MemoryError:
        pass
    thread.start()
"""


def capped_limits(workers: int = 1) -> SandboxLimits:
    require_kernel_sandbox()
    support = host_support()
    if not (support.run_uid or support.user_namespace):
        pytest.skip(f"no cap on threads here: {support.task_limit}")
    return SandboxLimits(sandbox="exact", timeout=10.0, workers=workers)


def test_a_thread_flood_is_the_models_error_naming_the_cap(house: CodeContext) -> None:
    with SandboxPool(capped_limits()) as pool:
        with pytest.raises(CodeError) as caught:
            pool.execute(FLOOD, house)
        assert caught.value.kind == "code_runtime"
        assert f"at most {TASK_LIMIT} threads" in caught.value.message, caught.value.message
        assert pool.execute(POOL_OF_FOUR, house).characters[0].target_action == "28"


def test_a_run_gets_the_cap_whatever_ran_before(house: CodeContext) -> None:
    with SandboxPool(capped_limits()) as pool:
        counts = [int(str(pool.execute(COUNT, house).characters[0].target_action)) for _ in range(2)]
    assert counts[0] == counts[1] and TASK_LIMIT - 3 <= counts[0] <= TASK_LIMIT - 1, counts


def test_a_flood_leaves_the_run_beside_it_untouched(house: CodeContext) -> None:
    """Two runs at once: each counts its own threads only."""
    with SandboxPool(capped_limits(workers=2)) as pool:
        pool.warm_up()
        answers: dict[str, object] = {}

        def flood() -> None:
            with pytest.raises(CodeError) as caught:
                pool.execute(FLOOD.replace("start()\n", "start()\n    hold.wait(1)\n"), house)
            answers["flood"] = caught.value.kind

        thread = threading.Thread(target=flood)
        thread.start()
        answers["honest"] = pool.execute(POOL_OF_FOUR, house).characters[0].target_action
        thread.join(30)
    assert answers == {"flood": "code_runtime", "honest": "28"}


def test_a_refused_fork_is_retried_and_then_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """The template's fork, as the kernel refuses it at a container's pids limit: retried, then a message."""
    calls = []

    def refuse() -> int:
        calls.append(1)
        raise BlockingIOError(errno.EAGAIN, os.strerror(errno.EAGAIN))

    monkeypatch.setattr(os, "fork", refuse)
    monkeypatch.setattr(worker, "_FORK_PATIENCE", 0.05)
    pid, why = worker._fork()
    assert pid is None and why.startswith("cannot fork: BlockingIOError") and len(calls) > 2


def test_a_pool_of_32_threads_runs_under_the_default_limits(house: CodeContext) -> None:
    with SandboxPool(capped_limits()) as pool:
        assert pool.execute(POOL_OF_32, house).characters[0].target_action == str(8 * sum(range(32)))


def test_a_thread_without_room_for_its_stack_is_a_memory_error(house: CodeContext) -> None:
    with SandboxPool(capped_limits()) as pool, pytest.raises(CodeError) as caught:
        pool.execute(STARVED, house)
    assert caught.value.kind == "code_memory", caught.value
    assert "can't start new thread" in caught.value.message and "memory limit" in caught.value.message
    assert "at most" not in caught.value.message


# The same two refusals through `_thread`, the module under `threading`, which model code may call directly.
LOW_LEVEL_FLOOD = """def parse_event():
    import _thread, threading
    threading.stack_size(1 << 16)
    hold = _thread.allocate_lock()
    hold.acquire()
    for _ in range(3000):
        _thread.start_new_thread(hold.acquire, ())
"""
LOW_LEVEL_STARVED = STARVED.replace("thread = threading.Thread(target=len, args=((),))", "import _thread").replace(
    "thread.start()", "_thread.start_new_thread(len, ((),))"
)


def test_a_flood_through_the_low_level_module_is_blamed_on_the_cap(house: CodeContext) -> None:
    with SandboxPool(capped_limits()) as pool, pytest.raises(CodeError) as caught:
        pool.execute(LOW_LEVEL_FLOOD, house)
    assert caught.value.kind == "code_runtime"
    assert f"at most {TASK_LIMIT} threads" in caught.value.message, caught.value.message


def test_a_low_level_thread_without_room_for_its_stack_is_a_memory_error(house: CodeContext) -> None:
    assert "_thread.start_new_thread" in LOW_LEVEL_STARVED
    with SandboxPool(capped_limits()) as pool, pytest.raises(CodeError) as caught:
        pool.execute(LOW_LEVEL_STARVED, house)
    assert caught.value.kind == "code_memory", caught.value
    assert "can't start new thread" in caught.value.message and "memory limit" in caught.value.message
