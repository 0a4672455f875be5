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
