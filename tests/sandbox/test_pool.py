"""The pool's shape and life cycle: one fresh child per run, forked from one template, for both sandboxes; at most
one run per core at a time whatever the concurrency, children forked ahead and replaced, and nothing a run does
(patching numpy, `re`, `typing` or the API, the random state, a thread) reaching a later run."""

from __future__ import annotations

import asyncio
import copy
import os
import random
import select
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import load_scene
from edsb.sandbox import CodeContext, CodeError, EdsbFault, SandboxError, SandboxLimits, SandboxPool, SceneSource
from edsb.sandbox.kernel import host_support
from edsb.sandbox.limits import SANDBOXES, SandboxName
from edsb.sandbox.pool import default_workers
from tests.security.test_sandbox_parity import CORPUS
from tests.support.kernel_sandbox import require_kernel_sandbox

SET_A = "def parse_event():\n    get_character('A').set_target_action({})\n"

# An honest program that touches what the poisoners below patch: `re`, `typing`, numpy, `math`, the API, printing.
HONEST = """def parse_event():
    import math, re
    from typing import List
    names: List[str] = ['chair_1', 'chair_2']
    m = re.match(r'chair_(\\d+)', names[1])
    total = int(np.array([1, 2, 3]).sum())
    seat = get_closest_object('table_1', 'chair')
    print(np.array([0.5, 1.25]))
    get_character('A').set_target_action(f'{m.group(1)}|{total}|{math.floor(2.5)}|{seat}')
"""
HONEST_ACTION = "2|6|2|chair_1"
HONEST_OUTPUT = "[0.5  1.25]\n"

# What plan code can reach to poison a process, in each sandbox. Under `restricted`, most of it is refused, and what
# is let through (typing's shared objects, `re`'s cache) is what used to reach later runs.
POISONS: dict[SandboxName, tuple[str, ...]] = {
    "restricted": (
        "def parse_event():\n    from typing import List\n    def evil(self, *p):\n        raise ValueError('x')\n"
        "    super(type(List), List).__init__(evil)\n",
        "def parse_event():\n    import re\n    for i in range(2000):\n        re.compile('chair_%d' % i)\n",
        "def parse_event():\n    np.array = None\n",
        "def parse_event():\n    global names\n    names = None\n",
    ),
    "exact": (
        """def parse_event():
    import math, random, re, sys, threading, typing
    get_character('A').set_target_action('poisoned')
    np.array = lambda *a, **k: np.zeros(3)
    np.set_printoptions(precision=1)
    re.match = lambda *a, **k: None
    re.compile('chair_(\\d+)')
    typing.List = None
    math.floor = lambda x: 99
    random.seed(99)
    np.random.seed(99)
    api = type(self)
    for name in dir(api):
        if not name.startswith('__'):
            setattr(api, name, lambda *a, **k: 'chair_99')
    sys.modules['numpy.linalg'] = None
    threading.Thread(target=lambda: [0 for _ in iter(int, 1)], daemon=True).start()
""",
        "def parse_event():\n    import builtins\n    builtins.print = None\n    builtins.int = str\n",
        "import os\nos.environ['PATH'] = '/nowhere'\ndef parse_event():\n    pass\n",
    ),
}


def limits_for(sandbox: SandboxName, **settings: float | int) -> SandboxLimits:
    if sandbox == "exact":
        require_kernel_sandbox()
    return SandboxLimits(sandbox=sandbox, **settings)  # type: ignore[arg-type]


def children(pid: int | None) -> set[int]:
    assert pid is not None
    return {int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


def action(pool: SandboxPool, code: str, context: CodeContext) -> object:
    [character] = pool.execute(code, context).characters
    return character.target_action


def verdict(pool: SandboxPool, code: str, context: CodeContext) -> tuple[str, object]:
    try:
        raw = pool.execute(code, context)
    except CodeError as exc:
        return str(exc.kind), exc.message
    return "ok", ([(c.character, c.position, c.target_action, c.orientation) for c in raw.characters], raw.output)


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_every_run_gets_a_fresh_child_and_children_are_forked_ahead(sandbox: SandboxName, house: CodeContext) -> None:
    with SandboxPool(limits_for(sandbox, timeout=5.0)) as pool:
        pool.warm_up()
        assert pool.size == default_workers()
        first = set(pool.idle_pids())
        assert len(first) == pool.size and children(pool.template_pid) == first
        results: list[object] = []
        most = 0

        def call(i: int) -> None:
            nonlocal most
            results.append(action(pool, SET_A.format(f"'{i}'"), house))
            most = max(most, len(children(pool.template_pid)))

        threads = [threading.Thread(target=call, args=(i,)) for i in range(32)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(map(str, results), key=int) == [str(i) for i in range(32)]
        pool.warm_up()
        assert not first & set(pool.idle_pids())  # each child served one run: none is left
        assert len(pool.idle_pids()) == pool.size
        # Running and forked-ahead children, and the ones killed but not yet reaped: bounded, whatever the burst.
        assert most <= 3 * pool.size


def test_children_are_forked_from_the_template_and_a_timeout_kills_one(house: CodeContext) -> None:
    with SandboxPool(SandboxLimits(timeout=1.0, workers=1)) as pool:
        assert action(pool, SET_A.format("'idle'"), house) == "idle"
        pool.warm_up()
        template = pool.template_pid
        [ahead] = pool.idle_pids()
        with pytest.raises(CodeError) as caught:
            pool.execute("def parse_event():\n    while True:\n        pass", house)
        assert caught.value.kind == "code_timeout"
        assert action(pool, SET_A.format("'idle'"), house) == "idle"
        pool.warm_up()
        [later] = pool.idle_pids()
        assert later != ahead and pool.template_pid == template
        assert ahead not in children(template)  # the one that timed out was killed and reaped, not left a zombie


def test_a_dead_template_is_restarted(house: CodeContext) -> None:
    with SandboxPool(SandboxLimits(timeout=5.0, workers=1)) as pool:
        pool.warm_up()
        template = pool.template_pid
        assert template is not None
        os.kill(template, signal.SIGKILL)
        pool.close_idle()  # the next call needs a new child
        assert action(pool, SET_A.format("'idle'"), house) == "idle"
        assert pool.template_pid not in (None, template)


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_poisoning_run_leaves_nothing_for_the_next(sandbox: SandboxName, house: CodeContext) -> None:
    """Concurrency 1, the same pool: whatever the poisoner's own verdict, the honest run after it is unaffected."""
    with SandboxPool(limits_for(sandbox, timeout=5.0, workers=1)) as pool:
        assert verdict(pool, HONEST, house) == ("ok", ([("A", [], HONEST_ACTION, None)], HONEST_OUTPUT))
        if sandbox == "exact":  # the poisoner ran to its end: every patch was made
            assert verdict(pool, POISONS[sandbox][0], house) == ("ok", ([("A", [], "poisoned", None)], ""))
        for poison in POISONS[sandbox]:
            verdict(pool, poison, house)
            assert verdict(pool, HONEST, house) == ("ok", ([("A", [], HONEST_ACTION, None)], HONEST_OUTPUT))


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_verdict_does_not_depend_on_what_ran_before(sandbox: SandboxName, house: CodeContext) -> None:
    """The parity corpus, run twice in two different orders with the poisoners among it, gives the same verdicts."""
    names = sorted(CORPUS)
    with SandboxPool(limits_for(sandbox, timeout=5.0, workers=1)) as pool:
        first = {name: verdict(pool, CORPUS[name][0], house) for name in names}
        shuffled = names[:]
        random.Random(29).shuffle(shuffled)
        second = {}
        for i, name in enumerate(shuffled):
            verdict(pool, POISONS[sandbox][i % len(POISONS[sandbox])], house)
            second[name] = verdict(pool, CORPUS[name][0], house)
    assert second == first


def test_the_random_state_is_the_runs_own(benchmark: Benchmark) -> None:
    """`random` and `numpy.random` start from the run's seed: the same seed draws the same numbers whatever ran
    before, another seed others (every fork of the template would otherwise draw the same)."""
    draw = "def parse_event():\n    import random\n    print(random.random(), np.random.rand())\n"
    one, two = (CodeContext.for_benchmark(benchmark.root, "House", seed=seed) for seed in (1, 2))
    with SandboxPool(limits_for("exact", timeout=5.0, workers=1)) as pool:
        before = pool.execute(draw, one).output
        pool.execute(POISONS["exact"][0], one)
        assert pool.execute(draw, one).output == before
        assert pool.execute(draw, two).output not in ("", before)


def forge(status: dict[str, object]) -> str:
    """Plan code that writes its own answer frame to every descriptor, then keeps running (top-level imports are
    invisible inside `parse_event`, as in the reference)."""
    return (
        "def parse_event():\n"
        "    import json, os, struct\n"
        f"    body = json.dumps({status!r}).encode()\n"
        "    for fd in range(3, 256):\n"
        "        try:\n"
        "            os.write(fd, struct.pack('>I', len(body)) + body)\n"
        "        except OSError:\n"
        "            pass\n"
        "    while True:\n"
        "        pass\n"
    )


def test_a_forged_answer_is_at_most_a_plan(house: CodeContext) -> None:
    """Under exact, the code can reach the channel: what it writes there is the model's answer, checked as data. A
    forged fault, a non-code error kind or a scene failure is the model's malformed answer, never edsb's."""
    plan = [{"character": "A", "position": [], "target_action": "forged", "orientation": None}]
    with SandboxPool(limits_for("exact", timeout=3.0, workers=1)) as pool:
        raw = pool.execute(forge({"status": "ok", "plan": plan, "output": ""}), house)
        assert [(c.character, c.target_action) for c in raw.characters] == [("A", "forged")]
        for status in (
            {"status": "fault", "message": "forged"},
            {"status": "fatal", "message": "cannot load the scene"},
            {"status": "error", "kind": "internal_error", "message": "forged"},
            {"status": "error", "kind": "transport", "message": "forged"},
            {"status": "contained"},
            {"status": "ok", "plan": "not a list"},
        ):
            with pytest.raises(CodeError) as caught:
                pool.execute(forge(status), house)
            assert caught.value.kind == "code_crash", status
        error = {"status": "error", "kind": "code_runtime", "message": "KeyError: 'x'"}
        with pytest.raises(CodeError, match="KeyError") as caught:
            pool.execute(forge(error), house)
        assert caught.value.kind == "code_runtime"
        assert action(pool, SET_A.format("'idle'"), house) == "idle"


class Unimportable(str):
    """A label whose class lives in this test module, which a contained child cannot import (Landlock lets it read,
    and its file view holds, only what the template imported): a scene holding one cannot be unpickled there."""


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_an_inline_scene_the_child_cannot_load_is_edsbs_error(sandbox: SandboxName, benchmark: Benchmark) -> None:
    """Unpickling a scene is edsb's work, done before any model code: its failure is a SandboxError that says so
    (it was a silent exit, the model's `code_crash`), and once the child has said it loaded its scene, a forged
    scene failure is the model's malformed answer. The next run on a loadable scene is unaffected."""
    if sandbox == "restricted" and host_support().landlock_abi is None:
        require_kernel_sandbox()  # without Landlock the child can import the test's module
    scene = copy.deepcopy(load_scene(benchmark, "House"))
    table = next(box for box in scene.objects if box.name == "table_1")
    object.__setattr__(table, "label", Unimportable(table.label))
    plain = CodeContext.create(load_scene(benchmark, "House"))
    with SandboxPool(limits_for(sandbox, timeout=3.0, workers=1)) as pool:
        with pytest.raises(
            SandboxError, match=r"^cannot load the scene in the sandbox: (PermissionError|ModuleNotFoundError)"
        ):
            pool.execute(SET_A.format("'idle'"), CodeContext.create(scene))
        assert action(pool, SET_A.format("'idle'"), plain) == "idle"
        if sandbox == "exact":
            with pytest.raises(CodeError) as caught:
                pool.execute(forge({"status": "fatal", "message": "cannot load the scene"}), plain)
            assert caught.value.kind == "code_crash"


def test_a_fault_is_edsbs_only_under_restricted(house: CodeContext) -> None:
    """The restricted sandbox's blame runs in the child (no model code reaches the channel there): its faults stay
    edsb's. The answer check is the same function for both; only that status differs."""
    from edsb.sandbox.pool import _answer

    fault = {"status": "fault", "message": "edsb's own"}
    with pytest.raises(EdsbFault):
        _answer(fault, SandboxLimits(sandbox="restricted"))
    with pytest.raises(CodeError) as caught:
        _answer(fault, SandboxLimits(sandbox="exact"))
    assert caught.value.kind == "code_crash"


def test_exact_on_a_host_without_the_kernel_layers_is_refused(house: CodeContext) -> None:
    if host_support().exact:
        pytest.skip("this host runs the exact sandbox (the simulated host is tested through `edsb run`)")
    with SandboxPool(SandboxLimits(sandbox="exact", workers=1)) as pool, pytest.raises(SandboxError, match="exact"):
        pool.execute(SET_A.format("'idle'"), house)


def test_a_repeated_program_shares_no_state_between_runs(house: CodeContext) -> None:
    code = (
        "counter = []\n"
        "def parse_event():\n"
        "    def f(x=[]):\n"
        "        x.append(1)\n"
        "        return len(x)\n"
        "    f()\n"
        "    get_character('A').set_target_action(str(f()))\n"
    )
    with SandboxPool(SandboxLimits(timeout=5.0, workers=1)) as pool:
        assert [action(pool, code, house) for _ in range(4)] == ["2"] * 4


def test_a_repeated_failing_program_fails_the_same_way(house: CodeContext) -> None:
    with SandboxPool(SandboxLimits(timeout=5.0, workers=1)) as pool:
        for code, kind in (
            ("def parse_event(:\n    pass", "code_syntax"),
            ("def parse_event():\n    import os", "code_policy"),
            ("def parse_event():\n    get_closest_object('chair_99')", "code_runtime"),
        ):
            failures = []
            for _ in range(3):
                with pytest.raises(CodeError) as caught:
                    pool.execute(code, house)
                failures.append((caught.value.kind, caught.value.message))
            assert failures[0][0] == kind and failures == [failures[0]] * 3


def test_scenes_given_at_start_are_loaded_once_for_every_child(benchmark: Benchmark) -> None:
    house = CodeContext.for_benchmark(benchmark.root, "House")
    castle = CodeContext.for_benchmark(benchmark.root, "Castle")  # no such scene
    assert isinstance(house.scene, SceneSource) and isinstance(castle.scene, SceneSource)
    with SandboxPool(SandboxLimits(timeout=5.0, workers=2)) as pool:
        pool.warm_up([house.scene, castle.scene])
        key = pool._hold(house.scene)  # the scene's pickle, by digest: the template never opens the data
        assert len(pool._idle) == 2 and all(child.scenes == {key} for child in pool._idle)
        assert action(pool, SET_A.format("get_closest_object('table_1', 'chair')"), house) == "chair_1"
        with pytest.raises(SandboxError, match="cannot load the scene"):
            pool.execute("def parse_event():\n    pass", castle)


def test_a_scene_first_asked_for_is_loaded_by_the_template_for_every_later_child(benchmark: Benchmark) -> None:
    office = CodeContext.for_benchmark(benchmark.root, "Office")
    assert isinstance(office.scene, SceneSource)
    with SandboxPool(SandboxLimits(timeout=5.0, workers=1)) as pool:
        pool.warm_up()
        assert all(not child.scenes for child in pool._idle)
        assert action(pool, SET_A.format("'idle'"), office) == "idle"
        pool.close_idle()
        pool.warm_up()
        assert [child.scenes for child in pool._idle] == [{pool._hold(office.scene)}]


def test_children_are_scheduled_as_batch_work(house: CodeContext) -> None:
    """They wait for a free core instead of preempting the runner's event loop (Linux)."""
    if not hasattr(os, "SCHED_BATCH"):
        pytest.skip("no SCHED_BATCH on this system")
    with SandboxPool(SandboxLimits(timeout=5.0, workers=2)) as pool:
        pool.warm_up()
        pids = [*pool.idle_pids(), pool.template_pid]
        assert [os.sched_getscheduler(pid) for pid in pids if pid is not None] == [os.SCHED_BATCH] * 3
        assert os.sched_getscheduler(0) != os.SCHED_BATCH  # the runner itself is left as it was


def test_an_event_loop_calls_through_one_thread_per_slot(house: CodeContext) -> None:
    """A pool's threads (`sandbox_threads` for the default pools) are as many as its runs at once: none waits for a
    slot, none idles in line for the GIL (asyncio's default pool would start cores + 4 threads)."""

    async def sweep(pool: SandboxPool) -> list[object]:
        loop = asyncio.get_running_loop()
        calls = [loop.run_in_executor(pool.threads, action, pool, SET_A.format(f"'{i}'"), house) for i in range(40)]
        return await asyncio.gather(*calls)

    before = set(threading.enumerate())
    with SandboxPool(SandboxLimits(timeout=5.0, workers=2)) as pool:
        pool.warm_up()
        assert asyncio.run(sweep(pool)) == [str(i) for i in range(40)]
        started = [thread for thread in set(threading.enumerate()) - before if thread.name.startswith("edsb-sandbox")]
        assert len(started) == pool.size == 2


def test_children_load_the_perturbed_scene_a_context_names(benchmark: Benchmark) -> None:
    """The same scene under two perturbation seeds is two scenes to the pool: each run's code sees its own names,
    and the same question finds the same box under its renamed id."""
    perturbed = Benchmark(benchmark.root, 1)
    mapping = perturbed.object_mapping("House")
    plain = CodeContext.for_benchmark(benchmark.root, "House")
    renamed = CodeContext.for_benchmark(benchmark.root, "House", perturb=1)
    assert isinstance(renamed.scene, SceneSource) and renamed.scene.perturb == 1
    ask = SET_A.format("get_closest_object('{}', 'chair')")
    with SandboxPool(SandboxLimits(timeout=5.0, workers=1)) as pool:
        pool.warm_up([renamed.scene])
        for table in ("table_1", "table_3", "table_4"):
            assert mapping[table] != table
            original = action(pool, ask.format(table), plain)
            assert isinstance(original, str) and mapping[original] != original
            assert action(pool, ask.format(mapping[table]), renamed) == mapping[original]


def test_children_forked_ahead_are_used_not_replaced(house: CodeContext) -> None:
    """A child forked ahead says once that it is contained, then waits: that frame does not make it look dead, so
    every run uses a child forked for it, and about one fork replaces it."""
    with SandboxPool(SandboxLimits(timeout=5.0, workers=2)) as pool:
        assert isinstance(house.scene, SceneSource)
        pool.warm_up([house.scene])
        template = pool._template
        assert template is not None
        forked: list[int] = []
        spawn = template.spawn

        def counting(*args: Any) -> list[Any]:
            made = spawn(*args)
            forked.extend(child.pid for child in made)
            return made

        template.spawn = counting  # type: ignore[method-assign]
        for child in list(pool._idle):  # each child forked ahead has contained itself and said so
            assert select.select([child.channel], [], [], 30)[0], "a child forked ahead never said it was contained"
        for _ in range(10):
            assert action(pool, SET_A.format("'idle'"), house) == "idle"
        pool.warm_up()
        # One fork per run, and now and then one more: a run that comes before the background fork has replaced
        # the last child used forks its own, and the background one is then spare. Taken for dead, every child
        # forked ahead was replaced at each run (two or three forks a run).
        assert 10 <= len(forked) < 20
