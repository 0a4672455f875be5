"""A pool's processes live no longer than the pool: closing it kills the children running code too (their calls
end with edsb's SandboxError, never a verdict on the model), a child dies with its template, and the template lives
as long as the pool, not as long as the thread that happened to start it (a parent-death signal follows the thread).

"Running code" is a child holding the memory its program filled, read from /proc; the programs then wait far longer
than the tests do."""

from __future__ import annotations

import os
import signal
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from edsb.sandbox import CodeContext, SandboxError, SandboxLimits, SandboxPool, execute_plan_code
from edsb.sandbox import pool as pool_module
from edsb.sandbox.limits import SANDBOXES, SandboxName
from edsb.sandbox.wire import RawPlan
from tests.support.edsb_cli import HANG_GUARD_S
from tests.support.kernel_sandbox import require_kernel_sandbox
from tests.support.processes import Process, descendants, poll, process, resident_bytes, running

HOLD = 96 << 20  # bytes the program fills: far above what an idle child holds
WAIT = {"exact": "import time\n    time.sleep(10 ** 6)", "restricted": "while True:\n        pass"}
GONE_WITHIN_S = 5.0  # a safety net: without the fix the child lives for the run's whole timeout (or for ever)
SET_A = "def parse_event():\n    get_character('A').set_target_action('idle')\n"


def _pool(sandbox: SandboxName) -> SandboxPool:
    if sandbox == "exact":
        require_kernel_sandbox()
    return SandboxPool(SandboxLimits(sandbox=sandbox, timeout=120.0, workers=1))


def _template(pool: SandboxPool) -> Process:
    found = process(pool.template_pid or 0)
    assert found is not None
    return found


def _running_code(pool: SandboxPool) -> set[Process]:
    """The pool's children that hold the program's memory."""
    return {(pid, start) for pid, start in descendants(_template(pool)[0]) if resident_bytes(pid) >= HOLD}


def _start_run(
    pool: SandboxPool, threads: ThreadPoolExecutor, sandbox: SandboxName, house: CodeContext
) -> Future[RawPlan]:
    """A run of code that holds memory and waits, started in a thread, returned once its code runs."""
    pool.warm_up()
    call = threads.submit(
        pool.execute, f"def parse_event():\n    hold = np.ones({HOLD // 8})\n    {WAIT[sandbox]}\n", house
    )
    assert poll(lambda: bool(_running_code(pool)) or call.done(), HANG_GUARD_S) is not None, "hung"
    assert not call.done(), call.exception()
    return call


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_closing_the_pool_kills_the_children_running_code(sandbox: SandboxName, house: CodeContext) -> None:
    pool = _pool(sandbox)
    call = _start_run(pool, pool.threads, sandbox, house)
    queued = pool.threads.submit(pool.execute, SET_A, house)  # the pool's one thread is busy
    processes = descendants(_template(pool)[0]) | {_template(pool)}
    pool.close()
    assert poll(lambda: not running(processes), GONE_WITHIN_S) is not None, running(processes)
    with pytest.raises(SandboxError, match="shut down"):  # edsb's: the run is redone, not judged
        call.result(timeout=HANG_GUARD_S)
    assert queued.cancelled()  # and a run still waiting for a thread never starts


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_child_running_code_dies_with_its_template(sandbox: SandboxName, house: CodeContext) -> None:
    """Under `exact` as root, the child changes user, which clears a parent-death signal: it is set again after."""
    with _pool(sandbox) as pool, ThreadPoolExecutor(1) as threads:
        call = _start_run(pool, threads, sandbox, house)
        processes = _running_code(pool)
        os.kill(_template(pool)[0], signal.SIGKILL)
        assert poll(lambda: not running(processes), GONE_WITHIN_S) is not None, running(processes)
        with pytest.raises(SandboxError, match="template"):  # edsb's failure, not the model's code_crash
            call.result(timeout=HANG_GUARD_S)


def test_the_template_outlives_the_thread_that_started_it(house: CodeContext) -> None:
    with SandboxPool(SandboxLimits(timeout=5.0, workers=1)) as pool:
        starter = threading.Thread(target=pool.warm_up)
        starter.start()
        starter.join()
        task = Path(f"/proc/self/task/{starter.native_id}")
        assert poll(lambda: not task.exists(), HANG_GUARD_S) is not None  # the thread is gone, not just joined
        template = _template(pool)
        pool.close_idle()  # the next run needs a child forked now, by the template
        [character] = pool.execute(SET_A, house).characters
        assert character.target_action == "idle"
        assert running({template}) and _template(pool) == template


def test_a_call_on_a_pools_own_thread_runs_on_that_pool(house: CodeContext) -> None:
    """So that a call starting as its pool closes fails, instead of starting a new pool that outlives the stop."""
    limits = SandboxLimits(timeout=5.0, workers=1)
    defaults = dict(pool_module._pools)  # the default pools earlier tests left, if any
    with SandboxPool(limits) as pool:
        [character] = pool.threads.submit(execute_plan_code, SET_A, house, limits).result().characters
        assert character.target_action == "idle"
        assert pool.template_pid is not None and pool_module._pools == defaults  # no default pool was made
    with pytest.raises(RuntimeError):  # and once it is closed, nothing more runs on its threads
        pool.threads.submit(execute_plan_code, SET_A, house, limits)
