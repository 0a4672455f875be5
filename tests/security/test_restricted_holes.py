"""The holes a red team found in the restricted sandbox, each closed by its cause: its reproduction and
more attacks of each family, every one through real worker processes (or the real pipeline), and each of which got
through before its fix.

- *super*: `super()` objects answered with no rule at all (`super(str, np.str_('x')).tofile`), and `__init__`
  through one re-initialised shared objects (`super(type(Literal), Literal).__init__(f)`).
- *callbacks and files*: numpy handed real classes to plan code (extra arguments it forwards to a callback, the
  `dtype=` of a method it calls by name), whose unbound `tofile` creates files; a `np.vectorize` object ran
  unchecked.
- *format walks*: the check stopped at the template's first syntax error, before the nested specs it had queued,
  while `str.format` renders those first; `int` then echoes the walked value in its error (the real `open`, the
  worker's frames and the data directory).
- *blame*: converting the plan met exceptions other than `TypeError` (a memoryview's `hash`), which were edsb's
  `internal_error`.
- *persistence*: what a run leaves in the worker reached later runs (re-initialised typing objects, numpy's lazy
  imports made or not, `re`'s cache).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from edsb.sandbox import ApiScene, CodeContext, SandboxLimits, SandboxPool
from edsb.sandbox.limits import SANDBOXES
from tests.support.data import DATA, require_data
from tests.support.hostile_values import FAILURES, METHODS, Hostile
from tests.support.kernel_sandbox import require_kernel_sandbox
from tests.support.sandbox_runs import LIMITS, body_code, verdict
from tests.support.scripted_programs import restricted_pipeline_records

NUMPY_ATTRIBUTE = "the attribute {!r} of numpy objects is not available in plan code"
FLOAT64_ATTRIBUTES = "the attributes of the class numpy.float64 are not available in plan code"
INIT = "access to the attribute '__init__' is not allowed"


def refused(pool: SandboxPool, context: CodeContext, target: Path, body: str) -> tuple[str, str]:
    """The verdict of an attack that may name a file to create (`TARGET`); no file may appear."""
    found = verdict(pool, context, body_code(body.replace("TARGET", str(target / "pwned"))))
    assert list(target.iterdir()) == []
    return found


# --- super ------------------------------------------------------------------------------------------------------------

SUPER = {
    "numpy scalar method through super (the issue's)": (
        "t = super(str, np.str_('x')).tofile\nnp.vectorize(t, otypes='O')(['TARGET'])",
        NUMPY_ATTRIBUTE.format("tofile"),
    ),
    "typing object re-initialised (the issue's)": (
        "from typing import Literal\ndef evil(self, *p):\n    raise ValueError('poisoned')\n"
        "super(type(Literal), Literal).__init__(evil)",
        INIT,
    ),
    "bytes scalar writes a file": (
        "super(type(b''), np.bytes_(b'x')).tofile('TARGET')",
        NUMPY_ATTRIBUTE.format("tofile"),
    ),
    "str scalar pickles to a file": ("super(str, np.str_('x')).dump('TARGET')", NUMPY_ATTRIBUTE.format("dump")),
    "by getattr": ("getattr(super(str, np.str_('x')), 'to' + 'file')('TARGET')", NUMPY_ATTRIBUTE.format("tofile")),
    "by hasattr": ("hasattr(super(str, np.str_('x')), 'ctypes')", NUMPY_ATTRIBUTE.format("ctypes")),
    "an exception's traceback method": (
        "class E(Exception):\n    pass\nsuper(E, E()).with_traceback",
        "access to the attribute 'with_traceback' of an exception is not allowed",
    ),
    "the List alias re-initialised": ("super(type(List), List).__init__(dict, 0)", INIT),
    "a shared flag re-initialised": ("super(type(re.I), re.I).__init__(0)", INIT),
    "a container of the run's re-initialised through its class": (
        "from collections import Counter\nc = Counter('a')\nsuper(Counter, c).__init__()",
        INIT,
    ),
}


@pytest.mark.parametrize("name", list(SUPER), ids=list(SUPER))
def test_super_answers_under_the_rules_of_the_object_beneath(
    pool: SandboxPool, context: CodeContext, target: Path, name: str
) -> None:
    body, message = SUPER[name]
    assert refused(pool, context, target, body) == ("code_policy", message)


def test_super_still_serves_the_runs_own_classes(pool: SandboxPool, context: CodeContext) -> None:
    body = """
class Seat:
    def __init__(self, name):
        self.name = name
    def label(self):
        return self.name.split('_')[0]
class Sofa(Seat):
    def __init__(self, name):
        super().__init__(name)
    def label(self):
        return 'big ' + super().label()
class NoSeat(KeyError):
    def __init__(self, where):
        super(NoSeat, self).__init__(where)
print(Sofa('sofa_1').label(), NoSeat('x').args, super(re.RegexFlag, re.RegexFlag).from_bytes(b'\\x01', 'big'))
"""
    assert verdict(pool, context, body_code(body)) == ("ok", "big sofa ('x',) re.TEMPLATE\n")


# --- callbacks and files: no real class reaches plan code -------------------------------------------------------------

FILE_WRITER = "lambda *a, t=None: (t or a[-1]).tofile((t or a[-1])(1), 'TARGET')"
CALLBACKS = {
    "an extra argument apply_along_axis forwards": (
        f"np.apply_along_axis({FILE_WRITER}, 0, np.ones((1, 1)), np.float64)",
        FLOAT64_ATTRIBUTES,
    ),
    "a keyword fromfunction forwards": (f"np.fromfunction({FILE_WRITER}, (1,), t=np.float64)", FLOAT64_ATTRIBUTES),
    "an extra argument piecewise forwards": (
        f"np.piecewise(np.ones(1), [True], [{FILE_WRITER}], np.float64)",
        FLOAT64_ATTRIBUTES,
    ),
    "an argument a vectorize object passes on": (f"np.vectorize({FILE_WRITER})([1], np.float64)", FLOAT64_ATTRIBUTES),
    "an argument a frompyfunc ufunc passes on": (
        "np.frompyfunc(lambda t: t.tofile(t(1), 'TARGET'), 1, 1)(np.float64)",
        FLOAT64_ATTRIBUTES,
    ),
    "the dtype of a method numpy calls by name": (
        "class D:\n    def sum(self, axis=None, dtype=None, out=None, **k):\n"
        "        return dtype.tofile(dtype(1), 'TARGET')\nnp.sum(D(), dtype=np.float64)",
        FLOAT64_ATTRIBUTES,
    ),
    "the dtype of another method numpy calls by name": (
        "class D:\n    def cumsum(self, axis=None, dtype=None, out=None):\n"
        "        return getattr(dtype, 'dump')('TARGET')\nnp.cumsum(D(), dtype=np.float64)",
        FLOAT64_ATTRIBUTES,
    ),
}


@pytest.mark.parametrize("name", list(CALLBACKS), ids=list(CALLBACKS))
def test_a_callback_never_gets_a_real_class(pool: SandboxPool, context: CodeContext, target: Path, name: str) -> None:
    body, message = CALLBACKS[name]
    assert refused(pool, context, target, body) == ("code_policy", message)


def test_callbacks_still_work_and_get_class_views(pool: SandboxPool, context: CodeContext) -> None:
    body = """
seen = []
def f(row, kind):
    seen.append(kind is np.float64)
    return kind(row.sum())
print(np.apply_along_axis(f, 0, np.ones((2, 2)), np.float64), seen)
print(np.vectorize(lambda v: v * 2)([1, 2]), np.frompyfunc(lambda v: v + 1, 1, 1)(2))
print(np.fromfunction(lambda i, j: i + j, (2, 2), dtype=int).tolist())
print(np.piecewise(np.arange(3.0), [np.arange(3) > 0], [lambda v: v * 2, 0]))
print(np.array2string(np.arange(2), formatter={'int': lambda v: f'<{v}>'}))
class D:
    def sum(self, axis=None, dtype=None, out=None, **k):
        return dtype is np.float32
print(np.sum(D(), dtype=np.float32))
@np.vectorize
def double(v):
    return v * 2
print(double([1, 2]), double.__name__, np.frompyfunc(len, 1, 1).__name__)
"""
    assert verdict(pool, context, body_code(body)) == (
        "ok",
        "[2. 2.] [True, True]\n[2 4] 3\n[[0, 1], [1, 2]]\n[0. 2. 4.]\n[<0> <1>]\nTrue\n[2 4] double len (vectorized)\n",
    )


# --- format walks -----------------------------------------------------------------------------------------------------

WALK = "the format field {{{}}} reads an attribute or an item, which plan code may not do in a format string"
CATCH = "try:\n    {}\nexcept Exception as e:\n    print(e.args[0])"
TRACEBACK = "try:\n    1 / 0\nexcept Exception as exc:\n    err = exc\n"
FRAMES = "1.__traceback__.tb_frame.f_back.f_back.f_locals[request][scene]"
FORMAT_WALKS = {
    "the real open (the issue's)": (
        CATCH.format("'{0:{1.__func__.__globals__[__builtins__][open]}} }'.format(1, get_character)"),
        WALK.format("1.__func__.__globals__[__builtins__][open]"),
    ),
    "the worker's frames, to the data directory": (
        TRACEBACK + CATCH.format(f"'{{0:{{{FRAMES}}}}} }}'.format(1, err)"),
        WALK.format(FRAMES),
    ),
    "an unterminated field after the walk": (
        CATCH.format("'{0:{1.real.__class__}}{2'.format(1, 2)"),
        WALK.format("1.real.__class__"),
    ),
    "format_map": (
        CATCH.format("'{a:{b.__class__}} }'.format_map({'a': 1, 'b': 2})"),
        WALK.format("b.__class__"),
    ),
    "unbound str.format": (CATCH.format("str.format('{0:{1.__class__}} }', 1, 2)"), WALK.format("1.__class__")),
    "a numpy string's format": (
        CATCH.format("np.str_('{0:{1.__class__}} }').format(1, 2)"),
        WALK.format("1.__class__"),
    ),
}


@pytest.mark.parametrize("name", list(FORMAT_WALKS), ids=list(FORMAT_WALKS))
def test_a_walk_ahead_of_a_syntax_error_is_refused(pool: SandboxPool, context: CodeContext, name: str) -> None:
    body, message = FORMAT_WALKS[name]
    assert verdict(pool, context, body_code(body)) == ("code_policy", message)


def test_a_template_that_cannot_be_parsed_is_refused_before_it_runs(pool: SandboxPool, context: CodeContext) -> None:
    """Python renders the fields ahead of a syntax error: here `print` would run first."""
    body = "'{0:{1}} }'.format(1, print('ran'))"
    assert verdict(pool, context, body_code(body)) == (
        "code_policy",
        "the format string cannot be parsed (Single '}' encountered in format string); plan code may only format "
        "with one that can",
    )


def test_the_data_directory_is_not_reachable_from_plan_code(pool: SandboxPool, context: CodeContext) -> None:
    """What a run can reach (the API, its handles, scene objects, areas, modules, errors) never names the data
    directory; the frame walk of `FORMAT_WALKS` did."""
    body = """
shown = [self, get_character, get_character('A'), get_object_supporting('microwave_1'), Area(), np, re, List]
for call in (lambda: get_closest_object('nothing_1'), lambda: get_object_supporting(1), lambda: np.ones(2) @ np.ones(3),
             lambda: get_area_to_sit_on(1).conditions[5], lambda: int('x'), lambda: np.array(['a']) + 1):
    try:
        call()
    except Exception as e:
        shown.append(e)
for value in shown:
    print(repr(value), str(value), type(value), getattr(value, '__name__', ''))
"""
    kind, printed = verdict(pool, context, body_code(body))
    assert kind == "ok" and printed.count("\n") == 14
    assert str(DATA) not in printed and DATA.name not in printed
    for walk, _ in FORMAT_WALKS.values():
        kind, printed = verdict(pool, context, body_code(walk))
        assert (kind, str(DATA) in printed) == ("code_policy", False)


# --- blame ------------------------------------------------------------------------------------------------------------

CONVERTING = "the plan holds a value that cannot be converted to plain data: "
COUNTER = "from collections import Counter\nc = Counter('ab')\nc.most_common = {}\n"
BLAME = {
    "a memoryview in the plan (the issue's)": (
        "c = get_character('A')\nc.set_target_action(super(str, np.str_('x')).data)",
        ("code_policy", NUMPY_ATTRIBUTE.format("data")),
    ),
    "a repr raising ValueError": (
        COUNTER.format("lambda *a: int('x')") + "get_character('A').set_target_action(c)",
        ("code_output", CONVERTING + "ValueError: invalid literal for int() with base 10: 'x'"),
    ),
    "a repr raising RuntimeError, deep in a list": (
        COUNTER.format("lambda *a: next(iter([]))")
        + "def g():\n    yield next(iter([]))\nc.most_common = lambda *a: list(g())\n"
        "get_character('A').set_position([[[[[c]]]]])",
        ("code_output", CONVERTING + "RuntimeError: generator raised StopIteration"),
    ),
    "a repr recursing without end": (
        COUNTER.format("lambda *a: repr(c)") + "get_character('A').set_target_action(c)",
        ("code_output", CONVERTING + "RecursionError: maximum recursion depth exceeded"),
    ),
    "a repr running out of memory": (
        COUNTER.format("lambda *a: 'x' * (1 << 40)") + "get_character('A').set_target_action(c)",
        ("code_memory", "MemoryError"),
    ),
}


@pytest.mark.parametrize("name", list(BLAME), ids=list(BLAME))
def test_a_failure_while_the_plan_is_converted_is_the_models(
    pool: SandboxPool, context: CodeContext, name: str
) -> None:
    body, (kind, message) = BLAME[name]
    found = verdict(pool, context, body_code(body))
    assert (found[0], found[1].startswith(message)) == (kind, True), found


def hostile_context(house_scene: ApiScene, method: str, failure: str) -> CodeContext:
    """The House scene, where the object `microwave_1` stands on has a label whose `method` raises `failure` in
    the worker."""
    scene = copy.deepcopy(house_scene)
    [cabinet] = [box for box in scene.objects if box.name == "cabinet_1"]
    object.__setattr__(cabinet, "label", Hostile(cabinet.label, method, failure))
    return CodeContext.create(scene)


SET_LABEL = "get_character('A').set_target_action(get_object_supporting('microwave_1').label)"


@pytest.fixture(scope="module", params=SANDBOXES)
def converting_pool(request: pytest.FixtureRequest) -> Iterator[SandboxPool]:
    """A pool of each sandbox: the conversion (`wire.to_plain`) is shared, and each sandbox reports its verdict."""
    if request.param == "exact":
        require_kernel_sandbox()
    with SandboxPool(dataclasses.replace(LIMITS, sandbox=request.param)) as pool:
        yield pool


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("method", METHODS)
def test_a_value_whose_special_methods_raise_is_the_models_to_convert(
    converting_pool: SandboxPool, house_scene: ApiScene, method: str, failure: str
) -> None:
    """Whatever a value in the plan raises while it is converted, a `BaseException` too, it is the model's
    `code_output` (its `code_memory` for a MemoryError), never edsb's fault; methods the conversion does not call
    change nothing."""
    found = verdict(converting_pool, hostile_context(house_scene, method, failure), body_code(SET_LABEL))
    if method not in ("__hash__", "__repr__"):
        assert found == ("ok", "")
    elif failure == "MemoryError":
        assert found == ("code_memory", "MemoryError")
    elif failure == "RecursionError":
        assert (found[0], found[1].startswith(CONVERTING + "RecursionError: maximum recursion")) == (
            "code_output",
            True,
        )
    else:
        assert found == ("code_output", f"{CONVERTING}{failure}: boom")


# --- persistence: an attack, then an honest run in the same single-worker pool ----------------------------------------

ONE_WORKER = SandboxLimits(timeout=10.0, memory_bytes=512 << 20, workers=1)


@pytest.fixture
def lone_pool() -> Iterator[SandboxPool]:
    """A new pool of one worker: the honest run follows the attack in the same worker process, if one serves both."""
    with SandboxPool(ONE_WORKER) as fresh:
        yield fresh


PERSISTENCE = {
    "Literal re-initialised (the issue's)": (
        "from typing import Literal\ndef evil(self, *p):\n    raise ValueError('poisoned')\n"
        "super(type(Literal), Literal).__init__(evil)",
        "from typing import Literal\nprint(Literal['eat'])",
        "typing.Literal['eat']\n",
    ),
    "Tuple re-initialised as a dict alias": (
        "from typing import Tuple\nsuper(type(Tuple), Tuple).__init__(dict, 0)",
        "from typing import Tuple\nprint(Tuple[int, str])",
        "typing.Tuple[int, str]\n",
    ),
    "Callable re-initialised": (
        "from typing import Callable\nsuper(type(Callable), Callable).__init__(dict, 0)",
        "from typing import Callable\nprint(Callable[[int], str])",
        "typing.Callable[[int], str]\n",
    ),
    "List re-initialised as a dict alias": (
        "super(type(List), List).__init__(dict)",
        "print(List[int], isinstance([], List))",
        "typing.List[int] True\n",
    ),
}


@pytest.mark.parametrize("name", list(PERSISTENCE), ids=list(PERSISTENCE))
def test_an_attack_leaves_nothing_for_the_next_run(lone_pool: SandboxPool, context: CodeContext, name: str) -> None:
    attack, honest, printed = PERSISTENCE[name]
    verdict(lone_pool, context, body_code(attack))  # refused or not: the next run must not notice it
    assert verdict(lone_pool, context, body_code(honest)) == ("ok", printed)


def test_an_honest_print_of_an_array_does_not_depend_on_earlier_runs(
    lone_pool: SandboxPool, context: CodeContext
) -> None:
    """`str(array)` makes numpy import its array printer on first use, through the running frame's `__import__`:
    the import guard refused it in a worker that had not printed an array yet, and let it pass afterwards."""
    body = "print(str(np.array([1.5])), repr(np.array([2])), f'{np.array([3])}')"
    for _ in range(2):
        assert verdict(lone_pool, context, body_code(body)) == ("ok", "[1.5] array([2]) [3]\n")


PROBE = "for mb in range(1024, 0, -4):\n    try:\n        x = np.zeros(mb << 17)\n        print(mb)\n        break\n"
PROBE += "    except Exception:\n        pass"


def test_a_runs_regex_cache_leaves_no_memory_to_the_next_run(lone_pool: SandboxPool, context: CodeContext) -> None:
    """`re` keeps the patterns compiled, in a cache that outlives the run (about 30 bytes a character): three
    passing runs left the worker about 44 MiB short, and an honest run that needs what a fresh one has failed with
    `code_memory`. Needs one fresh process per run."""
    kind, available = verdict(lone_pool, context, body_code(PROBE))
    assert kind == "ok"
    for i in range(3):
        body = f"re.compile('x' * 300000 + '{i}')\nre.compile('y' * 300000 + '{i}')"
        assert verdict(lone_pool, context, body_code(body)) == ("ok", "")
    needed = int(available) - 16
    assert verdict(lone_pool, context, body_code(f"x = np.zeros({needed} << 17)\nprint(x.size)")) == (
        "ok",
        f"{needed << 17}\n",
    )


# --- the reproductions through the real pipeline ----------------------------------------------------------------------

PLAN = "david = get_character('David')\ndavid.set_target_action('eat')\n"
PIPELINE = {
    "files": (SUPER["numpy scalar method through super (the issue's)"][0], "code_policy"),
    "format_walk": (FORMAT_WALKS["the real open (the issue's)"][0], "code_policy"),
    "blame": (BLAME["a memoryview in the plan (the issue's)"][0], "code_policy"),
    "persistence": (PERSISTENCE["Literal re-initialised (the issue's)"][0], "code_policy"),
    "array_printed": (
        "from typing import Literal\n"
        "assert str(np.array([1])) == '[1]' and str(Literal['x']) == \"typing.Literal['x']\"\n"
        + PLAN
        + "david.set_position(get_area_to_sit_on('chair_2'))",
        None,
    ),
}


@pytest.fixture(scope="module")
def holes_pipeline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """One `edsb run` at concurrency 1 of every program above, each followed by a benign one: program name → its
    run's record."""
    require_data()
    return restricted_pipeline_records(
        tmp_path_factory.mktemp("holes-pipeline"), {name: body for name, (body, _) in PIPELINE.items()}
    )


@pytest.mark.parametrize("name", list(PIPELINE), ids=list(PIPELINE))
def test_through_the_pipeline_each_reproduction_is_the_models_error(holes_pipeline: dict[str, dict], name: str) -> None:
    record, kind = holes_pipeline[name], PIPELINE[name][1]
    if kind is None:
        assert (record["status"], record["error_kind"]) == ("passed", None), record["error"]
    else:
        assert (record["status"], record["error_kind"]) == ("error", kind), record["error"]
    following = holes_pipeline[f"benign-{name}"]
    assert (following["status"], following["error"]) == ("passed", None)
