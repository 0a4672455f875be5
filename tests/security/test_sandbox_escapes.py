"""Escape attempts against the plan-code sandbox: each must be refused, contained, or harmless.

Everything runs through real worker processes with short limits; the whole file takes a few seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from edsb.sandbox import CodeContext, CodeError, SandboxError, SandboxLimits, SandboxPool

LIMITS = SandboxLimits(timeout=1.5, memory_bytes=512 << 20, workers=2)


@pytest.fixture(scope="module")
def escape_pool():
    with SandboxPool(LIMITS) as escape_pool:
        yield escape_pool


def outcome(escape_pool: SandboxPool, context: CodeContext, body: str) -> tuple[str, str]:
    """(kind, message) of a failing program, or ("ok", printed text)."""
    code = "def parse_event():\n" + "".join(f"    {line}\n" for line in body.strip("\n").splitlines())
    try:
        return "ok", escape_pool.execute(code, context).output
    except CodeError as exc:
        return exc.kind, exc.message


def healthy(escape_pool: SandboxPool, context: CodeContext) -> None:
    """The next run behaves normally."""
    raw = escape_pool.execute(
        "def parse_event():\n    get_character('A').set_target_action(get_closest_object('table_1', 'chair'))", context
    )
    assert [(c.character, c.target_action) for c in raw.characters] == [("A", "chair_1")]


REFUSED = {
    "import": "import os",
    "import from": "from os import path",
    "import inside expression": "__import__('os')",
    "open": "open('/etc/passwd').read()",
    "exec": "exec('1')",
    "eval": "eval('1')",
    "compile": "compile('1', 'x', 'exec')",
    "globals": "globals()",
    "vars": "vars()",
    "dunder attribute": "().__class__.__bases__",
    "dunder by getattr": "getattr(getattr((), '__cl' + 'ass__'), '__ba' + 'ses__')",
    "private by getattr": "getattr(get_character('A'), '_api')",
    "function globals": "getattr(get_closest_object, '__globals__')",
    "bound method self": "get_closest_object.__self__",
    "format attribute walk": "'{0.__class__}'.format(1)",
    "format_map attribute walk": "'{x.__class__}'.format_map({'x': 1})",
    "f-string attribute walk": "f'{get_character.__func__}'",
    "generator frame": "(i for i in []).gi_frame",
    "traceback": "try:\n    1 / 0\nexcept Exception as e:\n    e.__traceback__",
    "exception payload": "try:\n    get_character('A').nothing\nexcept AttributeError as e:\n    e.obj",
    "class with a dunder method": "class X:\n    def __eq__(self, other):\n        return True",
    "type with three arguments": "type('X', (), {})",
    "the real type, through type of a class": "T = type(type(1))",
    "format of the str class": "f = getattr(type(''), 'format')\nf('{0.__class__}', 1)",
    "setattr": "setattr(get_character('A'), 'name', 'B')",
    "attribute write on a handle": "c = get_character('A')\nc.name = 'B'",
    "attribute write on a builtin": "f = get_closest_object\nf.x = 1",
    "print to a file": "print('x', file=None or [])",
    "underscore name": "_x = 1",
    "object": "object()",
}


@pytest.mark.parametrize("body", list(REFUSED.values()), ids=list(REFUSED))
def test_refused(escape_pool: SandboxPool, context: CodeContext, body: str) -> None:
    kind, message = outcome(escape_pool, context, body)
    assert kind == "code_policy", message


def test_a_swallowed_refusal_is_still_a_policy_violation(escape_pool: SandboxPool, context: CodeContext) -> None:
    body = "try:\n    open('/etc/passwd')\nexcept Exception:\n    pass\nget_character('A').set_target_action('idle')"
    assert outcome(escape_pool, context, body)[0] == "code_policy"


def test_the_worker_environment_is_empty_and_secrets_never_reach_it(
    context: CodeContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EDSB_TEST_SECRET", "hunter2")
    with SandboxPool(LIMITS) as fresh:
        fresh.execute("def parse_event():\n    pass", context)
        fresh.warm_up()
        [worker, *_] = fresh._idle
        environ = Path(f"/proc/{worker.pid}/environ").read_bytes()
    assert b"hunter2" not in environ and b"EDSB_TEST_SECRET" not in environ
    assert b"API_KEY" not in environ


def test_no_route_to_modules(escape_pool: SandboxPool, context: CodeContext) -> None:
    # Names that would lead to os/sys simply do not exist in the namespace.
    for body in ("os.environ", "sys.modules", "builtins.open", "__builtins__"):
        kind, message = outcome(escape_pool, context, body)
        assert kind in ("code_runtime", "code_policy"), message
        assert kind == "code_policy" or message.startswith("NameError")


def test_infinite_loop_is_stopped_by_its_wall_clock_limit(escape_pool: SandboxPool, context: CodeContext) -> None:
    kind, message = outcome(escape_pool, context, "while True:\n    pass")
    assert (kind, message) == ("code_timeout", f"TimeoutError: the code ran longer than {LIMITS.timeout:g} s")
    healthy(escape_pool, context)


def test_cpu_limit_backstops_the_wall_clock(context: CodeContext) -> None:
    with SandboxPool(SandboxLimits(timeout=30.0, cpu_seconds=1.0, workers=1)) as slow:
        with pytest.raises(CodeError) as caught:
            slow.execute("def parse_event():\n    while True:\n        pass", context)
        assert caught.value.kind == "code_timeout"
        assert caught.value.message == "TimeoutError: the code used up its CPU time"  # not the 30 s wall clock


@pytest.mark.parametrize(
    "body",
    ["x = 'a' * (10 ** 10)", "x = [0] * (10 ** 9)", "x = []\nwhile True:\n    x.append(' ' * 10 ** 6)"],
    ids=["string", "list", "growing"],
)
def test_memory_bombs_are_stopped(escape_pool: SandboxPool, context: CodeContext, body: str) -> None:
    assert outcome(escape_pool, context, body)[0] == "code_memory"
    healthy(escape_pool, context)


def test_huge_integer_arithmetic_times_out(escape_pool: SandboxPool, context: CodeContext) -> None:
    assert outcome(escape_pool, context, "x = 7 ** (10 ** 9)")[0] in ("code_timeout", "code_memory")
    healthy(escape_pool, context)


def test_recursion_is_a_runtime_error(escape_pool: SandboxPool, context: CodeContext) -> None:
    code = "def parse_event():\n    f = lambda g: g(g)\n    f(f)\n"
    with pytest.raises(CodeError) as caught:
        escape_pool.execute(code, context)
    assert caught.value.kind == "code_runtime" and caught.value.message.startswith("RecursionError")


def test_oversized_results_and_prints_are_capped(escape_pool: SandboxPool, context: CodeContext) -> None:
    kind, _ = outcome(escape_pool, context, "get_character('A').set_position(['x' * 1000] * 5000)")
    assert kind == "code_output"
    kind, printed = outcome(escape_pool, context, "for i in range(10 ** 5):\n    print('spam' * 10)")
    assert kind == "ok" and len(printed) == LIMITS.max_printed_chars


def test_runs_do_not_leak_into_each_other(escape_pool: SandboxPool, context: CodeContext) -> None:
    first = "global leaked\nleaked = 1\nget_character('A').set_target_action('idle')"
    assert outcome(escape_pool, context, first)[0] == "ok"
    for _ in range(3):  # whichever worker serves the next runs
        assert outcome(escape_pool, context, "leaked") == ("code_runtime", "NameError: name 'leaked' is not defined")
    # Shared objects cannot be changed: the Area class, builtins, the API object.
    assert outcome(escape_pool, context, "Area.conditions = 1")[0] == "code_policy"
    assert outcome(escape_pool, context, "len = None\nget_character('A').set_target_action('idle')")[0] == "ok"
    assert outcome(escape_pool, context, "print(len([1]))") == ("ok", "1\n")
    healthy(escape_pool, context)


def test_no_file_can_be_written_even_by_accident(escape_pool: SandboxPool, context: CodeContext) -> None:
    # There is no file API at all; the worker additionally runs with RLIMIT_FSIZE = 0 and cwd = /.
    with SandboxPool(LIMITS) as fresh:
        fresh.execute("def parse_event():\n    pass", context)
        fresh.warm_up()
        [worker, *_] = fresh._idle
        limits = Path(f"/proc/{worker.pid}/limits").read_text()
    file_size = next(line for line in limits.splitlines() if line.startswith("Max file size"))
    assert file_size.split()[3:5] == ["0", "0"]
    address_space = next(line for line in limits.splitlines() if line.startswith("Max address space"))
    assert address_space.split()[3] == str(LIMITS.memory_bytes)


def test_finalisers_run_inside_the_run_that_left_them(escape_pool: SandboxPool, context: CodeContext) -> None:
    """A generator suspended in `try/finally`, kept in a reference cycle, is finalised before the answer is sent:
    its endless loop times out its own run, never a later one."""
    body = (
        "def g():\n    try:\n        yield 1\n    finally:\n        while True:\n            pass\n"
        "x = g()\nnext(x)\nkeep = [x]\nkeep.append(keep)\nget_character('A').set_target_action('idle')"
    )
    assert outcome(escape_pool, context, body)[0] == "code_timeout"
    for _ in range(3):  # allocate plenty: a leftover cycle would be collected (and loop) during these runs
        assert outcome(escape_pool, context, "x = [[i] for i in range(50000)]")[0] == "ok"
    healthy(escape_pool, context)


def test_a_refusal_inside_a_finaliser_is_still_a_policy_violation(
    escape_pool: SandboxPool, context: CodeContext
) -> None:
    body = (
        "def g():\n    try:\n        yield 1\n    finally:\n        open('/tmp/x', 'w')\n"
        "x = g()\nnext(x)\nkeep = [x]\nkeep.append(keep)\nget_character('A').set_target_action('idle')"
    )
    assert outcome(escape_pool, context, body)[0] == "code_policy"


def test_plans_are_capped_below_the_answer_size(escape_pool: SandboxPool, context: CodeContext) -> None:
    kind, message = outcome(escape_pool, context, "get_character('A').set_position(['sit on chair_1'] * 2000)")
    assert (kind, message.split(" (")[0]) == ("code_output", "the plan is too large")


def test_a_memory_limit_below_the_workers_own_needs_is_refused_at_start(context: CodeContext) -> None:
    tiny = SandboxPool(SandboxLimits(timeout=2.0, memory_bytes=64 << 20, workers=1))
    with tiny, pytest.raises(SandboxError, match="the code memory limit of 64 MiB is too small"):
        tiny.execute("def parse_event():\n    pass", context)
