"""What the sandbox allows because the reference's `exec` runs it (numpy, typing, `__name__`, `str.format`, plain
classes), and the attacks against each allowance; then type and class leaks and exception rendering.

Real worker processes with short limits. Every attack asserts the exact verdict (kind and message): the model's
execution error, never an edsb fault, and no file created.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from edsb.sandbox import CodeContext, CodeError, LatestPlan, RawPlan, SandboxPool
from tests.support.data import DATA
from tests.support.sandbox_runs import body_code
from tests.support.sandbox_runs import verdict as code_verdict


def run(pool: SandboxPool, context: CodeContext, code: str) -> RawPlan:
    return pool.execute(code, context)


def verdict(pool: SandboxPool, context: CodeContext, body: str) -> tuple[str, str]:
    """(kind, message) of a failing body; an edsb fault fails the test."""
    return code_verdict(pool, context, body_code(body))


# --- the allowances ---------------------------------------------------------------------------------------------------


def test_numpy_is_bound_and_importable_in_every_form(pool: SandboxPool, context: CodeContext) -> None:
    body = """
import numpy
import numpy as np2
import numpy.linalg as la
from numpy import array, argmin
from numpy.linalg import norm
p, q = np.array([1.0, 2.0]), array([4.0, 6.0])
print(np.linalg.norm(p - q), la.norm(q - p), norm([3, 4]), np is numpy, np2 is np)
print(np.mean([1, 2, 3]), argmin([3, 1, 2]), np.argmax([1, 5, 2]), np.sqrt(16.0), np.clip(7, 0, 3))
print(np.dot([1, 2], [3, 4]), np.zeros(2).tolist(), np.arange(3).sum(), (np.ones(3) * 2).shape)
print(isinstance(p, np.ndarray), type(p) == np.ndarray, type(p[0]) is np.float64, p.dtype == np.float64)
print(np.issubdtype(p.dtype, np.floating), np.zeros(1, dtype=np.int32).dtype)
print(np.array([1, 2], dtype=np.float32).dtype, np.add.reduce([1, 2, 3]), np.finfo(np.float64).eps > 0)
"""
    assert verdict(pool, context, body) == (
        "ok",
        "5.0 5.0 5.0 True True\n2.0 1 1 4.0 3\n11 [0.0, 0.0] 3 (3,)\nTrue True True True\nTrue int32\nfloat32 6 True\n",
    )


def test_array_items_can_be_set_but_not_array_attributes(pool: SandboxPool, context: CodeContext) -> None:
    body = """
a = np.zeros((2, 3))
a[0] = 5
a[1:] += 2
a[:, 0] += 1
a[a > 3] = 1
xs = [1, 2, 3]
xs[1:] += [9]
print(a.tolist(), xs)
"""
    assert verdict(pool, context, body) == ("ok", "[[1.0, 1.0, 1.0], [3.0, 2.0, 2.0]] [1, 2, 3, 9]\n")
    for attribute in ("shape = (3, 2)", "strides = (0, 0)", "dtype = np.uint8"):
        kind, text = verdict(pool, context, f"a = np.zeros((2, 3))\na.{attribute}")
        assert (kind, text) == (
            "code_runtime",
            f"AttributeError: numpy array attributes cannot be set in plan code ({attribute.split()[0]})",
        )


def test_numpy_values_in_a_plan_count_as_the_python_values(pool: SandboxPool, context: CodeContext) -> None:
    body = (
        "c = get_character(np.str_('A'))\nc.set_target_action(np.str_('sit'))\n"
        "c.set_position([np.float64(1.5), np.float32(2.0), np.int64(3)])"
    )
    [entry] = run(pool, context, body_code(body)).characters
    assert (entry.character, entry.target_action, entry.position) == ("A", "sit", [1.5, 2.0, 3])
    assert [type(v) for v in entry.position] == [float, float, int]


def test_typing_names_are_bound_and_importable(pool: SandboxPool, context: CodeContext) -> None:
    """`List` is bound, as in the reference's executor module; the other names are imported where they are used
    (a top-level import is not seen inside `parse_event`, as in the reference)."""
    code = (
        "from typing import List, Sequence\n"
        "def parse_event():\n"
        "    import typing\n"
        "    from typing import Any, Dict, Optional, Sequence, Tuple\n"
        "    def names(xs: List[str], n: Optional[int] = None) -> Dict[str, Tuple[int, Any]]:\n"
        "        return {x: (len(x), typing.Union) for x in xs[:n]}\n"
        "    print(sorted(names(['ab', 'c'])), isinstance([], List), Sequence is typing.Sequence)\n"
    )
    assert run(pool, context, code).output == "['ab', 'c'] True True\n"


@pytest.mark.parametrize("name", ["Optional", "Dict", "Tuple", "Any"])
def test_typing_names_the_reference_leaves_unbound_are_not_bound(
    pool: SandboxPool, context: CodeContext, name: str
) -> None:
    """The reference's executor binds `List` only, and evaluates a function's annotations when it is defined: a
    helper annotated with another typing name that the code did not import is a NameError there, and here."""
    body = f"def helper(x: {name}) -> List:\n    return [x]\nprint(helper(1))"
    assert verdict(pool, context, body) == ("code_runtime", f"NameError: name '{name}' is not defined")
    assert verdict(pool, context, f"from typing import {name}\n" + body) == ("ok", "[1]\n")


def test_name_is_not_main_so_a_main_block_is_skipped(pool: SandboxPool, context: CodeContext) -> None:
    code = (
        "def parse_event():\n    print(__name__)\n"
        "if __name__ == '__main__':\n    parse_event = None\n"  # would make the entry uncallable
    )
    assert run(pool, context, code).output == "plan_code\n"


def test_str_format_works_without_walks(pool: SandboxPool, context: CodeContext) -> None:
    body = """
print("{}_{}".format("chair", 3), "{0}-{0}".format("a"), "{x:>4}|{y!r}".format(x=1, y="b"))
print("{:{}}|".format(3, 5), "{n:.2f}".format_map({"n": 2.5}), str.format("{} {}", 1, 2), format(0.5, ".0%"))
f = getattr(type(""), "format")
print(f("{}!", "hi"), "{{}} {}".format(1))
"""
    assert verdict(pool, context, body) == ("ok", "chair_3 a-a    1|'b'\n    3| 2.50 1 2 50%\nhi! {} 1\n")


def test_format_errors_stay_pythons_own(pool: SandboxPool, context: CodeContext) -> None:
    """A missing argument is Python's own error; a template that cannot be parsed is refused before any of it runs
    (`str.format` would render the fields ahead of the error first)."""
    assert verdict(pool, context, "'{}'.format()") == (
        "code_runtime",
        "IndexError: Replacement index 0 out of range for positional args tuple",
    )
    assert verdict(pool, context, "'{'.format(1)") == (
        "code_policy",
        "the format string cannot be parsed (Single '{' encountered in format string); plan code may only format "
        "with one that can",
    )


def test_plain_classes_work(pool: SandboxPool, context: CodeContext) -> None:
    body = """
class Seat(object):
    kind = "chair"
    def __init__(self, name, score=0):
        self.name = name
        self.score = score
    def better(self, other):
        return self if self.score >= other.score else other
    @staticmethod
    def label(name):
        return name.split("_")[0]
class Sofa(Seat):
    def __init__(self, name):
        super().__init__(name, score=5)
        self.score += 1
class NoSeat(Exception):
    def __init__(self, where):
        super().__init__(f"no seat near {where}")
        self.where = where
best = Seat("chair_1", 2).better(Sofa("sofa_1"))
Seat.kind = "seat"
print(best.name, best.score, Seat.label(best.name), isinstance(best, Seat), type(best) is Sofa, Seat.kind)
try:
    raise NoSeat("table_1")
except NoSeat as e:
    print(e.where, e.args)
get_character("A").set_target_action(best.name)
"""
    assert verdict(pool, context, body) == ("ok", "sofa_1 6 sofa True True seat\ntable_1 ('no seat near table_1',)\n")


def test_the_containers_of_collections_work(pool: SandboxPool, context: CodeContext) -> None:
    body = """
from collections import Counter, defaultdict, deque, OrderedDict
c = Counter(['a', 'b', 'a'])
c['z'] += 2
g = defaultdict(list)
g['k'].append(1)
g['j'] = [2]
q = deque([1, 2], maxlen=2)
q.append(3)
o = OrderedDict(a=1)
o['b'] = 2
o.move_to_end('a')
print(c.most_common(2), dict(g), list(q), list(o))
"""
    assert verdict(pool, context, body) == ("ok", "[('a', 2), ('z', 2)] {'k': [1], 'j': [2]} [2, 3] ['b', 'a']\n")


def test_a_class_exception_is_the_models_runtime_error(pool: SandboxPool, context: CodeContext) -> None:
    body = "class NoSeat(Exception):\n    pass\nraise NoSeat('none left')"
    assert verdict(pool, context, body) == ("code_runtime", "NoSeat: none left")


# --- attacks on the allowances ----------------------------------------------------------------------------------------

NUMPY_FILES = "numpy.{} is not available in plan code (it reads or writes files)"
NUMPY_MEMORY = "numpy.{} is not available in plan code (it reaches raw memory)"
NUMPY_ATTRIBUTE = "the attribute {!r} of numpy objects is not available in plan code"
OBJECT_ARRAY = "numpy arrays of Python objects (dtype=object) are not available in plan code"
ATTACKS = {
    # numpy's files, memory, ctypes and pickles.
    "np.load": ("np.load('TARGET')", NUMPY_FILES.format("load")),
    "np.save": ("np.save('TARGET', np.zeros(3))", NUMPY_FILES.format("save")),
    "np.savetxt": ("np.savetxt('TARGET', np.zeros(3))", NUMPY_FILES.format("savetxt")),
    "np.fromfile": ("np.fromfile('/etc/passwd')", NUMPY_FILES.format("fromfile")),
    "np.memmap": ("np.memmap('TARGET', mode='w+', shape=(4,))", NUMPY_MEMORY.format("memmap")),
    "np.frombuffer": ("np.frombuffer(b'abcd')", NUMPY_MEMORY.format("frombuffer")),
    "np.ctypeslib": ("np.ctypeslib.as_array", NUMPY_MEMORY.format("ctypeslib")),
    "np.lib.format": ("np.lib.format.open_memmap('TARGET', mode='w+')", NUMPY_MEMORY.format("lib")),
    "as_strided": ("np.lib.stride_tricks.as_strided(np.zeros(1), (10**6,))", NUMPY_MEMORY.format("lib")),
    "np.DataSource": (
        "np.DataSource('/').open('/etc/passwd')",
        "numpy.DataSource is not available in plan code (it opens files and URLs)",
    ),
    "from numpy import save": ("from numpy import save", "Line 2: " + NUMPY_FILES.format("save")),
    "import numpy.lib": ("import numpy.lib", "Line 2: import statements are not allowed, except of " + "x"),
    "np.random state": (
        "np.random.seed(0)",
        "numpy.random is not available in plan code (it changes shared state)",
    ),
    "np.set_printoptions": (
        "np.set_printoptions(precision=1)",
        "numpy.set_printoptions is not available in plan code (it changes shared state)",
    ),
    "ndarray.tofile": ("np.zeros(3).tofile('TARGET')", NUMPY_ATTRIBUTE.format("tofile")),
    "ndarray.dump": ("np.zeros(3).dump('TARGET')", NUMPY_ATTRIBUTE.format("dump")),
    "ndarray.dumps": ("np.zeros(3).dumps()", NUMPY_ATTRIBUTE.format("dumps")),
    "ndarray.ctypes": ("np.zeros(3).ctypes.data", NUMPY_ATTRIBUTE.format("ctypes")),
    "ndarray.ctypes by getattr": ("getattr(np.zeros(3), 'cty' + 'pes')", NUMPY_ATTRIBUTE.format("ctypes")),
    "ndarray.base": ("np.zeros(3)[1:].base", NUMPY_ATTRIBUTE.format("base")),
    "ndarray.data": ("np.zeros(3).data", NUMPY_ATTRIBUTE.format("data")),
    "ndarray.setflags": ("np.zeros(3).setflags(write=True)", NUMPY_ATTRIBUTE.format("setflags")),
    "__array_interface__": (
        "np.zeros(3).__array_interface__",
        'Line 2: "__array_interface__" is an invalid attribute name because it starts with "_".',
    ),
    "array interface by getattr": (
        "getattr(np.zeros(3), '__array_' + 'interface__')",
        "access to the attribute '__array_interface__' is not allowed",
    ),
    "scalar tofile": ("np.float64(1.0).tofile('TARGET')", NUMPY_ATTRIBUTE.format("tofile")),
    "flat iterator base": ("np.zeros(3).flat.base", NUMPY_ATTRIBUTE.format("base")),
    "unbound tofile on the class": (
        "np.ndarray.tofile(np.zeros(3), 'TARGET')",
        "the attributes of the class numpy.ndarray are not available in plan code",
    ),
    "ndarray over a buffer": (
        "type(np.zeros(1))((4,), buffer=b'abcdefgh' * 4)",
        "the class numpy.ndarray cannot be called in plan code",
    ),
    "dtype.type leads to a view": (
        "np.zeros(1).dtype.type.tofile(np.float64(1), 'TARGET')",
        "the attributes of the class numpy.float64 are not available in plan code",
    ),
    "object array by dtype": ("np.array([1, 2], dtype='O')", OBJECT_ARRAY),
    "object array of API objects": ("np.array([get_character('A'), 1])", OBJECT_ARRAY),
    "object array by astype": ("np.zeros(2).astype('O')", OBJECT_ARRAY),
    "object array from vectorize, then used": (
        "v = np.vectorize(lambda i: get_character('A'), otypes='O')\nx = v([1])\nx.tolist()",
        OBJECT_ARRAY,
    ),
    "object array from vectorize, into a function": (
        "v = np.vectorize(lambda i: Area(), otypes='O')\nnp.sqrt(v([1]))",
        OBJECT_ARRAY,
    ),
    "vectorize internals": (
        "np.vectorize(len).pyfunc",
        "the attribute 'pyfunc' of a numpy function is not available in plan code",
    ),
    "ufunc internals": ("np.sqrt.at", "the attribute 'at' of a numpy function is not available in plan code"),
    "numpy function globals": (
        "getattr(np.mean, '__glo' + 'bals__')",
        "access to the attribute '__globals__' is not allowed",
    ),
    "writing to the numpy view": ("np.load = len", "changing a ModuleView object is not allowed in plan code"),
    # Format strings.
    "format attribute walk": (
        "'{0.__class__}'.format(1)",
        "the format field {0.__class__} reads an attribute or an item, which plan code may not do in a format string",
    ),
    "format index walk": (
        "'{0[x]}'.format({'x': 1})",
        "the format field {0[x]} reads an attribute or an item, which plan code may not do in a format string",
    ),
    "format walk in a nested spec": (
        "'{0:{1.real}}'.format(1, 2)",
        "the format field {1.real} reads an attribute or an item, which plan code may not do in a format string",
    ),
    "format_map walk": (
        "'{a.b}'.format_map({'a': get_character('A')})",
        "the format field {a.b} reads an attribute or an item, which plan code may not do in a format string",
    ),
    "unbound format walk": (
        "str.format('{0.set_position.__self__}', get_character('A'))",
        "the format field {0.set_position.__self__} reads an attribute or an item, which plan code may not do in a "
        "format string",
    ),
    "format walk on a numpy string": (
        "np.str_('{0.__class__}').format(1)",
        "the format field {0.__class__} reads an attribute or an item, which plan code may not do in a format string",
    ),
    "swallowed format walk": (
        "try:\n    '{0.__class__}'.format(1)\nexcept Exception:\n    pass\nget_character('A').set_target_action('x')",
        "the format field {0.__class__} reads an attribute or an item, which plan code may not do in a format string",
    ),
    # collections: the containers only.
    "collections.abc": ("import collections\ncollections.abc.Iterable.register(int)", "collections.abc is not x"),
    "collections.UserString format walk": (
        "import collections\ncollections.UserString('{0.__class__}').format(1)",
        "collections.UserString is not available in plan code",
    ),
    "namedtuple": ("from collections import namedtuple", "Line 2: collections.namedtuple is not available in x"),
    # Typing objects are inert.
    "typing register": (
        "from typing import Iterable\nIterable.register(int)",
        "the attribute 'register' of a typing object is not available in plan code",
    ),
    "typing origin": ("getattr(List, '__ori' + 'gin__')", "access to the attribute '__origin__' is not allowed"),
    "typing forwarding": (
        "from typing import Dict\nDict.fromkeys([1])",
        "the attribute 'fromkeys' of a typing object is not available in x",
    ),
    "get_type_hints": (
        "from typing import get_type_hints",
        "Line 2: typing.get_type_hints is not available in plan code",
    ),
    # Classes.
    "metaclass keyword": ("class X(metaclass=type):\n    pass", "Line 2: class keywords (metaclass=...) are x"),
    "dunder method": (
        "class X:\n    def __getattr__(self, name):\n        return 1",
        'Line 3: "__getattr__" is not allowed: of the special methods, a class may only define __init__',
    ),
    "dunder class attribute": (
        "class X:\n    __slots__ = ()",
        'Line 3: "__slots__" is an invalid variable name because it starts with "_"',
    ),
    "builtin base": (
        "class S(str):\n    pass",
        "the class S may only derive from classes the plan code defined or from the builtin exceptions",
    ),
    "Area base": (
        "class A(Area):\n    pass",
        "the class A may only derive from classes the plan code defined or from the builtin exceptions",
    ),
    "API class base": (
        "class C(type(get_character('A'))):\n    pass",
        "the class C may only derive from classes the plan code defined or from the builtin exceptions",
    ),
    "type() of an own class": ("class X:\n    pass\nM = type(X)", "type() of a class is not available in plan code"),
    "super of another object": (
        "x = getattr(super(Area, Area()), '__getattri' + 'bute__')",
        "access to the attribute '__getattribute__' is not allowed",
    ),
    "name mangling": (
        "class X:\n    def __init__(self):\n        self.__secret = 1",
        'Line 4: "__secret" is an invalid attribute name because it starts with "_".',
    ),
}


def expected_message(message: str, target: Path) -> str:
    return message.replace("TARGET", str(target / "pwned"))


@pytest.mark.parametrize("name", list(ATTACKS), ids=list(ATTACKS))
def test_attack_on_an_allowance_is_refused(pool: SandboxPool, context: CodeContext, target: Path, name: str) -> None:
    body, message = ATTACKS[name]
    kind, text = verdict(pool, context, body.replace("TARGET", str(target / "pwned")))
    assert kind == "code_policy", text
    if message.endswith(" x"):  # the end of the message names a list or a reason that may grow
        assert text.startswith(message[:-2]), text
    else:
        assert text == expected_message(message, target)
    assert list(target.iterdir()) == []


def test_an_if_main_block_cannot_hide_a_refusal(pool: SandboxPool, context: CodeContext) -> None:
    code = "def parse_event():\n    pass\nif __name__ != '__main__':\n    open('/etc/passwd')\n"
    with pytest.raises(CodeError) as caught:
        run(pool, context, code)
    assert (caught.value.kind, caught.value.message) == ("code_policy", "open() is not available in plan code")


def test_name_cannot_be_rebound(pool: SandboxPool, context: CodeContext) -> None:
    assert verdict(pool, context, "global __name__\n__name__ = 'edsb.sandbox.x'")[0] == "code_policy"


# --- type and class leaks ---------------------------------------------------------------------------------------------

CHARACTER_CALL = "the class Character cannot be called in plan code"
API_ATTRIBUTES = "the attributes of the class CodeApi are not available in plan code"
LEAKS = {
    "forged character handle": ("type(get_character('X'))('X', 42).set_target_action('eat')", CHARACTER_CALL),
    "forged handle, swallowed": (
        "try:\n    type(get_character('X'))('X', 42)\nexcept Exception:\n    pass\n"
        "get_character('X').set_target_action('eat')",
        CHARACTER_CALL,
    ),
    "unbound API method": ("getattr(type(self), 'get_clo' + 'sest_object')(1, 'chair_1')", API_ATTRIBUTES),
    "forged API object": (
        "type(self)(1).get_closest_object('chair_1')",
        "the class CodeApi cannot be called in plan code",
    ),
    "forged scene object": (
        "type(get_object_supporting('microwave_1'))(1).label",
        "the class SceneObject cannot be called in plan code",
    ),
    "class of a class view": (
        "type(type(self))(int, None)",
        "the class ClassView cannot be called in plan code",
    ),
    "class of a module view": ("type(np)(1, 2)", "the class ModuleView cannot be called in plan code"),
    "class of a format method": ("type('{}'.format)('{0.x}', 'format', None)", "the class SafeFormat cannot be x"),
    "class of a numpy function": (
        "type(np.mean)(len, None)",
        "the class NumpyFunction cannot be called in plan code",
    ),
    "policy exception class": (
        "try:\n    open('x')\nexcept Exception as e:\n    raise type(e)('fake')",
        "open() is not available in plan code",
    ),
    "class view attribute": ("type(self).get_character", API_ATTRIBUTES),
    "class view called by numpy": (
        "v = np.vectorize(type(get_character('A')), otypes='O')\nv('X', 42)",
        CHARACTER_CALL,
    ),
    "class view called by frompyfunc": (
        "f = np.frompyfunc(type(self), 1, 1)\nf([1])",
        "the class CodeApi cannot be called in plan code",
    ),
    "class view by getattr": ("getattr(type(self), '_c' + 'ls')", "access to the attribute '_cls' is not allowed"),
}


@pytest.mark.parametrize("name", list(LEAKS), ids=list(LEAKS))
def test_no_real_class_of_the_code_api_reaches_model_code(pool: SandboxPool, context: CodeContext, name: str) -> None:
    body, message = LEAKS[name]
    kind, text = verdict(pool, context, body)
    assert kind == "code_policy", text
    assert text.startswith(message[:-2]) if message.endswith(" x") else text == message


def test_names_and_classes_read_as_dunders(pool: SandboxPool, context: CodeContext) -> None:
    """`type(e).__name__` and `e.__class__.__name__` in an error message; `__class__` answers as `type()` does."""
    body = """
try:
    {}['x']
except Exception as e:
    print(type(e).__name__, e.__class__.__name__, e.__class__ is KeyError)
print(type(self).__name__, self.__class__, np.__name__, np.linalg.norm.__name__, len.__name__)
"""
    assert verdict(pool, context, body) == ("ok", "KeyError KeyError True\nCodeApi <class 'CodeApi'> numpy norm len\n")
    assert verdict(pool, context, "get_character('A').__class__('X', 42)") == ("code_policy", CHARACTER_CALL)
    assert verdict(pool, context, "(1).__class__.__class__") == (
        "code_policy",
        "type() of a class is not available in plan code",
    )
    assert verdict(pool, context, "Area.__class__")[0] == "code_policy"
    assert verdict(pool, context, "Exception().__name__") == (
        "code_runtime",
        "AttributeError: 'Exception' object has no attribute '__name__'",
    )
    assert verdict(pool, context, "f = len\nf.__name__ = 'x'")[0] == "code_policy"


def test_class_views_still_answer_isinstance_and_equality(pool: SandboxPool, context: CodeContext) -> None:
    body = """
a, b = get_character('A'), get_character('B')
T = type(a)
print(T, isinstance(b, T), issubclass(type(b), T), type(a) is type(b), type(self) == type(self), T is type(self))
print(type(Area()) is Area, type(1) is int, isinstance(np.zeros(1), (list, np.ndarray)))
"""
    assert verdict(pool, context, body) == ("ok", "<class 'Character'> True True True True False\nTrue True True\n")


def test_numpy_values_given_to_the_api_fail_as_the_models_errors(pool: SandboxPool, context: CodeContext) -> None:
    empty = "ValueError: The truth value of an empty array is ambiguous. Use `array.size > 0` to check that an array"
    kind, text = verdict(pool, context, "get_closest_object('table_1', np.array([]))")
    assert (kind, text.startswith(empty)) == ("code_runtime", True)
    kind, text = verdict(pool, context, "get_objects_close_to('table_1', np.array(['chair']))")
    assert (kind, text.startswith(empty)) == ("code_runtime", True)
    assert verdict(pool, context, "get_character(np.zeros(2)).set_target_action('eat')") == (
        "code_runtime",
        "TypeError: unhashable type: 'numpy.ndarray'",
    )


def test_an_array_compared_with_a_seat_fails_as_the_models_error(pool: SandboxPool) -> None:
    """`is_object_occupied` compares the model's value with each seat: an array's ambiguous truth value is the
    model's runtime error, as in the reference, not a fault of edsb."""
    seated = CodeContext.for_benchmark(DATA, "House", {"Ann": LatestPlan("eat", ("sit on chair_1",), "completed")})
    with pytest.raises(CodeError) as caught:
        pool.execute(body_code("is_object_occupied(np.array(['chair_1', 'chair_2']))"), seated)
    assert (caught.value.kind, caught.value.message.split(".")[0]) == (
        "code_runtime",
        "ValueError: The truth value of an array with more than one element is ambiguous",
    )


# --- exception rendering ----------------------------------------------------------------------------------------------

UNRENDERABLE = "<its message could not be rendered: {}>"
RENDERING = {
    "huge int": ("raise ValueError(10 ** 5000)", "ValueError: " + UNRENDERABLE.format("ValueError")),
    "huge int as key": ("{}[10 ** 5000]", "KeyError: " + UNRENDERABLE.format("ValueError")),
    "huge int in a list": ("raise RuntimeError([1, 10 ** 5000])", "RuntimeError: " + UNRENDERABLE.format("ValueError")),
    "huge int in an area": ("raise ValueError(Area([10 ** 5000]))", "ValueError: " + UNRENDERABLE.format("ValueError")),
    "huge int as a character name": (
        "raise ValueError(get_character(10 ** 5000))",
        "ValueError: " + UNRENDERABLE.format("ValueError"),
    ),
    "huge int in an own exception": (
        "class E(Exception):\n    def __init__(self):\n        super().__init__(10 ** 5000)\nraise E()",
        "E: " + UNRENDERABLE.format("ValueError"),
    ),
    "huge int in an own object": (
        "class Box:\n    def __init__(self):\n        self.v = 1\nraise ValueError([Box(), 10 ** 5000])",
        "ValueError: " + UNRENDERABLE.format("ValueError"),
    ),
    "nested too deep": (
        "x = []\nfor i in range(100000):\n    x = [x]\nraise ValueError(x)",
        "ValueError: " + UNRENDERABLE.format("RecursionError"),
    ),
    "huge int in a formatted message": (
        "raise ValueError(f'{10 ** 5000}')",
        "ValueError: Exceeds the limit (4300 digits) for integer string conversion; use sys.set_int_max_str_digits() "
        "to increase the limit",
    ),
    "an exception raised with a class": ("raise ValueError", "ValueError"),
}


@pytest.mark.parametrize("name", list(RENDERING), ids=list(RENDERING))
def test_an_unrenderable_exception_is_still_the_models_error(
    pool: SandboxPool, context: CodeContext, name: str
) -> None:
    body, message = RENDERING[name]
    assert verdict(pool, context, body) == ("code_runtime", message)


def test_long_messages_are_capped_in_the_worker(pool: SandboxPool, context: CodeContext) -> None:
    kind, text = verdict(pool, context, "raise ValueError('x' * 10 ** 6)")
    assert (kind, len(text), text[-1]) == ("code_runtime", 2001, "…")


def test_lone_surrogates_never_leave_the_worker(pool: SandboxPool, context: CodeContext) -> None:
    with pytest.raises(CodeError) as caught:
        run(pool, context, body_code("raise ValueError('\\ud800 bad \\udfff')"))
    assert (caught.value.message, caught.value.repaired) == ("ValueError: \ufffd bad \ufffd", True)
    body = (
        "c = get_character('\\ud800A')\nc.set_target_action('\\udc00eat')\n"
        "c.set_position([Area(['\\ud801'])])\nprint('\\ud802')"
    )
    raw = run(pool, context, body_code(body))
    [entry] = raw.characters
    kept = (entry.character, entry.target_action, raw.output, raw.repaired)
    assert kept == ("\ufffdA", "\ufffdeat", "\ufffd\n", True)
    assert not any(0xD800 <= ord(c) < 0xE000 for c in entry.position[0].text)  # repr escapes them
    clean = run(pool, context, body_code("get_character('A').set_target_action('eat \U0001f600')"))
    assert (clean.characters[0].target_action, clean.repaired) == ("eat \U0001f600", False)


def test_typing_caches_do_not_carry_a_runs_objects_into_the_next_run(pool: SandboxPool, context: CodeContext) -> None:
    """`Literal[g]` keeps `g` in a cache of the `typing` module: the generator is never finalised while its run
    lasts (as in the reference, whose process keeps the cache), so the run passes; its process ends with the run,
    and the generator's endless `finally` never runs in a later one, which each get a fresh process."""
    body = (
        "from typing import Literal\n"
        "def g():\n    try:\n        yield 1\n    finally:\n        while True:\n            pass\n"
        "x = g()\nnext(x)\nkept = Literal[x]\nget_character('A').set_target_action('idle')"
    )
    [entry] = run(pool, context, body_code(body)).characters
    assert (entry.character, entry.target_action) == ("A", "idle")
    for _ in range(3):
        assert verdict(pool, context, "print(List[int])") == ("ok", "typing.List[int]\n")
