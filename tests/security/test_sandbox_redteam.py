"""A red-team pass against the sandbox's allowances (numpy, typing, collections, `str.format`, plain classes, class
views, exception rendering): each attack tried, with the exact verdict it gets.

The first group are attacks that succeeded before their fix: `mro()` handed out unvetted base classes (`object`,
`BaseException`, and `enum.Enum` behind `re.RegexFlag`, whose functional API makes classes with any dunder method:
a `__hash__` that fails in the worker's packing was edsb's `internal_error`, a `BaseException` raised there killed
the worker); `np.longdouble` in a plan sent the packing into endless recursion (the model's `RecursionError` for
edsb's fault); and a refusal met while an exception was rendered (a `Counter`'s `repr` calls its `most_common`,
which the code may set) was reported as a runtime error. The rest were refused, contained or harmless already.

Real worker processes with short limits, as in `test_sandbox_allowances.py`: an edsb fault fails the test, and no
attack may create a file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from edsb.sandbox import CodeContext, RawPlan, SandboxPool
from tests.support.data import require_data
from tests.support.sandbox_runs import LIMITS, body_code, verdict
from tests.support.scripted_programs import restricted_pipeline_records


def plan(pool: SandboxPool, context: CodeContext, body: str) -> RawPlan:
    return pool.execute(body_code(body), context)


# --- attacks that succeeded before their fix --------------------------------------------------------------------------

MRO = "access to the attribute 'mro' is not allowed"
ENUM = "Enum = re.RegexFlag.mro()[5]\n"
FIXED = {
    # `mro()` of any class: the real `object` and `BaseException`, which the policy never hands out.
    "mro of a re class": ("print(re.RegexFlag.mro())", MRO),
    "mro of a flag's class by getattr": ("getattr(type(re.I), 'm' + 'ro')()", MRO),
    "mro by hasattr": ("hasattr(int, 'mro')", MRO),
    "the real object": ("obj = int.mro()[1]\nobj()", MRO),
    "BaseException raised": ("raise Exception.mro()[1]('base')", MRO),
    # enum.Enum's functional API: a class with dunder methods, outside the class statement's checks.
    "enum __hash__ failing in the packing (was internal_error)": (
        ENUM + "K = Enum('K', {'a': 1, '__hash__': lambda self: 1 / 0})\nget_character('A').set_position([K.a])",
        MRO,
    ),
    "enum __hash__ returning a str in the API (was internal_error)": (
        ENUM + "n = [0]\n"
        "def h(self):\n    n[0] += 1\n    return 1 if n[0] == 1 else 'x'\n"
        "K = Enum('K', {'a': 1, '__hash__': h})\nget_character(K.a).set_target_action('eat')",
        MRO,
    ),
    "enum __str__ returning an int in the API (was internal_error)": (
        ENUM + "K = Enum('K', {'a': 1, '__str__': lambda self: 6})\nget_area_to_sit_on(K.a)",
        MRO,
    ),
    "enum __repr__ raising BaseException in the packing (killed the worker)": (
        "B = Exception.mro()[1]\n" + ENUM + "def r(self):\n    raise B('x')\n"
        "K = Enum('K', {'a': 1, '__repr__': r})\nget_character('A').set_position([K.a])",
        MRO,
    ),
    # A refusal in model code that rendering the exception, or packing a too-large plan, ran (was code_runtime and
    # code_output).
    "refusal while the exception is rendered": (
        "from collections import Counter\nc = Counter('ab')\nc.most_common = lambda *a: open('TARGET', 'w')\n"
        "raise ValueError(c)",
        "open() is not available in plan code",
    ),
    "refusal while a too-large plan is packed": (
        "from collections import Counter\nc = Counter('ab')\nc.most_common = lambda *a: open('TARGET', 'w')\n"
        "get_character('A').set_position([c] + ['x' * 1000] * 50)",
        "open() is not available in plan code",
    ),
}


COUNTER = "from collections import Counter\nc = Counter('ab')\nc.most_common = lambda *a: [(1, 2, 3)]\n"
COUNTER_ERROR = "ValueError: dictionary update sequence element #0 has length 3; 2 is required"
#: A `Counter` whose `most_common` (called by its `repr`) returns what `dict()` rejects: the ValueError is raised in
#: `collections`, below the API's (or `print`'s) operation on the model's value. It was edsb's `internal_error`.
FORMATTED_BY_EDSB = {
    "an area of it": "get_area_to_sit_on(c)",
    "an orientation to it": "get_character('A').set_orientation(c)",
    "the objects close to it": "get_objects_close_to(c)",
    "printing it": "print(c)",
    "the repr of an area holding it": "repr(Area([c]))",
}


@pytest.mark.parametrize("name", list(FORMATTED_BY_EDSB), ids=list(FORMATTED_BY_EDSB))
def test_a_failure_in_the_library_code_of_a_models_value_is_the_models(
    pool: SandboxPool, context: CodeContext, name: str
) -> None:
    assert verdict(pool, context, body_code(COUNTER + FORMATTED_BY_EDSB[name])) == ("code_runtime", COUNTER_ERROR)


@pytest.mark.parametrize("name", list(FIXED), ids=list(FIXED))
def test_a_fixed_attack_is_refused(pool: SandboxPool, context: CodeContext, target: Path, name: str) -> None:
    body, message = FIXED[name]
    assert verdict(pool, context, body_code(body.replace("TARGET", str(target / "pwned")))) == ("code_policy", message)
    assert list(target.iterdir()) == []


def test_an_area_without_conditions_is_the_models_error(pool: SandboxPool, context: CodeContext) -> None:
    """`del area.conditions`, then `set_position(area)`: the AttributeError was raised in the API's own frame,
    unmarked, and so recorded as edsb's `internal_error`."""
    body = "a = Area()\ndel a.conditions\nget_character('A').set_position(a)"
    assert verdict(pool, context, body_code(body)) == (
        "code_runtime",
        "AttributeError: 'Area' object has no attribute 'conditions'",
    )


def test_long_doubles_in_a_plan_count_as_floats(pool: SandboxPool, context: CodeContext) -> None:
    """`np.longdouble(x).item()` is a long double again: the packing recursed until RecursionError, which was
    reported as the model's runtime error."""
    raw = plan(
        pool,
        context,
        "c = get_character('A')\nc.set_position([np.longdouble(1.5), 2])\nc.set_target_action(np.longdouble(0.25))",
    )
    [entry] = raw.characters
    assert (entry.position, entry.target_action) == ([1.5, 2], 0.25)
    assert [type(v) for v in (*entry.position, entry.target_action)] == [float, int, float]


# --- attacks that were refused already --------------------------------------------------------------------------------

NUMPY_ATTRIBUTE = "the attribute {!r} of numpy objects is not available in plan code"
OBJECT_ARRAY = "numpy arrays of Python objects (dtype=object) are not available in plan code"
REFUSED = {
    "enum functional API on the flag class": ("type(re.I)('X', {'__hash__': len})", None),
    "typing alias as a base": (
        "class E(List):\n    pass",
        "the class E may only derive from classes the plan code defined or from the builtin exceptions",
    ),
    "own exception carrying an API object, read back": (
        "class E(Exception):\n    def __init__(self):\n        self.args = (get_character('A'),)\nraise E()",
        "access to the attribute 'get_character' of an exception is not allowed",
    ),
    "dunder written on an own class": (
        "class X:\n    pass\nX.__init_subclass__ = 1",
        'Line 4: "__init_subclass__" is an invalid attribute name because it starts with "_".',
    ),
    "dunder as a class attribute": (
        "class X:\n    __getattr__ = len",
        'Line 3: "__getattr__" is an invalid variable name because it starts with "_"',
    ),
    "decorator handing out a refused builtin": (
        "def deco(f):\n    return open\n@deco\ndef g():\n    pass\ng('TARGET')",
        "open() is not available in plan code",
    ),
    "property read by the API": (
        "class X:\n    @property\n    def conditions(self):\n        return open('TARGET', 'w')\n"
        "get_intersected_area(X(), Area())",
        "open() is not available in plan code",
    ),
    "generator frame": (
        "def g():\n    yield 1\ng().gi_frame",
        'Line 4: "gi_frame" is a restricted name, that is forbidden to access in RestrictedPython.',
    ),
    "generator code by getattr": (
        "def g():\n    yield 1\ngetattr(g(), 'gi_' + 'code')",
        "access to the attribute 'gi_code' is not allowed",
    ),
    "exception traceback method": ("ValueError(1).with_traceback", "access to the attribute 'with_traceback' of x"),
    "numpy exception traceback method": (
        "np.linalg.LinAlgError('x').with_traceback",
        "access to the attribute 'with_traceback' of an exception is not allowed",
    ),
    "format_map index walk": (
        "'{0[0]}'.format_map({'0': [1]})",
        "the format field {0[0]} reads an attribute or an item, which plan code may not do in a format string",
    ),
    "import numpy.lib": ("import numpy.lib", "Line 2: import statements are not allowed, except of x"),
    "from numpy import lib": ("from numpy import lib", "Line 2: numpy.lib is not available in plan code (it reaches x"),
    "frompyfunc ufunc at": ("np.frompyfunc(len, 1, 1).at", "the attribute 'at' of a numpy function is not x"),
    "ufunc reduceat": ("np.add.reduceat([1, 2], [0])", "the attribute 'reduceat' of a numpy function is not x"),
    "ufunc at": ("np.add.at(np.zeros(2), [0], 1)", "the attribute 'at' of a numpy function is not x"),
    "array view as another dtype": ("np.zeros(2).view(np.int64)", NUMPY_ATTRIBUTE.format("view")),
    "dtype fields": ("np.dtype([('a', 'f8')]).fields", NUMPY_ATTRIBUTE.format("fields")),
    "flat iterator base": ("np.zeros(3).flat.base", NUMPY_ATTRIBUTE.format("base")),
    "linalg result ctypes": ("np.linalg.svd(np.eye(2)).U.ctypes", NUMPY_ATTRIBUTE.format("ctypes")),
    "finfo dtype type": (
        "np.finfo(np.float64).dtype.type.tofile",
        "the attributes of the class numpy.float64 are not available in plan code",
    ),
    "structured dtype with an object field": ("np.zeros(2, dtype=[('a', 'O')])", OBJECT_ARRAY),
    "sub-array dtype of objects": ("np.zeros(2, dtype=('O', (2,)))", OBJECT_ARRAY),
    "dtype object given to array": ("np.array(['a'], dtype=np.dtype('O'))", OBJECT_ARRAY),
    "fromiter of objects": ("np.fromiter([get_character('A')], dtype='O')", OBJECT_ARRAY),
    "object array inside a list": ("np.concatenate([np.vectorize(lambda i: Area(), otypes='O')([1])])", OBJECT_ARRAY),
    "array2string of objects": ("np.array2string(np.vectorize(lambda i: Area(), otypes='O')([1]))", OBJECT_ARRAY),
    "asarray of an Area": ("np.asarray(Area())", OBJECT_ARRAY),
    "apply_along_axis returning API objects": (
        "np.apply_along_axis(lambda r: get_character('A'), 0, np.ones((2, 2)))",
        OBJECT_ARRAY,
    ),
    "array2string formatter calling a refused builtin": (
        "np.array2string(np.arange(3), formatter={'all': lambda x: open('TARGET', 'w')})",
        "open() is not available in plan code",
    ),
    "ndarray __new__": ("np.ndarray.__new__", 'Line 2: "__new__" is an invalid attribute name because it starts x'),
    "array __array__": (
        "np.array([1, 2]).__array__()",
        'Line 2: "__array__" is an invalid attribute name because it starts with "_".',
    ),
    "an exception group handler": (
        "try:\n    raise ValueError(1)\nexcept* ValueError:\n    pass",
        "Line 2: TryStar statements are not allowed.",
    ),
    "deleting a handle's name": (
        "del get_character('A').name",
        "changing a Character object is not allowed in plan code",
    ),
    "deleting a numpy function": ("del np.array", "changing a ModuleView object is not allowed in plan code"),
    "a class whose dtype attribute asks numpy for objects": (
        "class D:\n    dtype = np.dtype('O')\nnp.zeros(2, dtype=D())",
        OBJECT_ARRAY,
    ),
    "a method numpy calls by name (np.sum calls .sum)": (
        "class D:\n    def sum(self, *a, **k):\n        return open('TARGET', 'w')\nnp.sum(D())",
        "open() is not available in plan code",
    ),
    "timedelta64 scalar type": ("np.timedelta64(3, 'D')", "numpy.timedelta64 is not available in plan code (it is x"),
    # A `np.vectorize` object is a numpy callable like the others: what it returns is checked.
    "an object array made by a vectorize object": (
        "x = np.vectorize(lambda i: i, otypes='O')([1, 2])\nprint(x + x, -x, abs(x), x @ x)",
        OBJECT_ARRAY,
    ),
    "an ufunc over a module inside an object array": (
        "np.sqrt([np.vectorize(lambda i: np, otypes='O')([1])])",
        OBJECT_ARRAY,
    ),
}


@pytest.mark.parametrize("name", list(REFUSED), ids=list(REFUSED))
def test_an_attack_is_refused(pool: SandboxPool, context: CodeContext, target: Path, name: str) -> None:
    body, message = REFUSED[name]
    kind, text = verdict(pool, context, body_code(body.replace("TARGET", str(target / "pwned"))))
    if message is None:  # a TypeError of Python's own (the enum cannot be extended), not a refusal
        assert (kind, text) == ("code_runtime", "TypeError: <enum 'X'> cannot extend <flag 'RegexFlag'>")
    else:
        assert kind == "code_policy", text
        assert text.startswith(message[:-2]) if message.endswith(" x") else text == message
    assert list(target.iterdir()) == []


# --- contained: a limit, or the model's own error ---------------------------------------------------------------------

CONTAINED = {
    "nested format specs beyond Python's limit": (
        "'{:{:{:{}}}}'.format(1, 2, 3, 4)",
        ("code_runtime", "ValueError: Max string recursion exceeded"),
    ),
    "a gigabyte format width": ("format(1, '>1000000000')", ("code_memory", "MemoryError")),
    "a broadcast view summed": (
        "np.broadcast_to(np.zeros(1), (10 ** 12,)).sum()",
        ("code_timeout", f"TimeoutError: the code ran longer than {LIMITS.timeout:g} s"),
    ),
    "a huge array": ("np.ones((10 ** 5, 10 ** 5))", ("code_memory", "MemoryError")),
    "a module view as an area": (
        "get_intersected_area(np, Area())",
        ("code_runtime", "AttributeError: module 'numpy' has no attribute 'conditions'"),
    ),
    "the refused object as a dtype": (
        "np.zeros(2).astype(object)",
        ("code_runtime", "TypeError: Cannot interpret '<edsb.sandbox.restricted.policy._Refused object at 0x"),
    ),
    "a class view as a dtype": (
        "np.issubdtype(np.float64, type(self))",
        ("code_runtime", "TypeError: Cannot interpret '<class 'CodeApi'>' as a data type"),
    ),
    "format_map with a mapping of its own": (
        "class M:\n    def keys(self):\n        return ['a']\n'{a}'.format_map(M())",
        ("code_runtime", "TypeError: 'M' object is not subscriptable"),
    ),
    "keyword unpacking of a mapping of its own": (
        "class M:\n    def keys(self):\n        return ['a']\ndict(**M())",
        ("code_runtime", "TypeError: 'M' object is not subscriptable"),
    ),
    "numpy calling a module view's method by name": (
        "np.round(np)",
        ("code_runtime", "TypeError: rint() takes from 1 to 2 positional arguments but 0 were given"),
    ),
    "bytes of an array's buffer": ("bytes(np.zeros(1))", ("code_runtime", "NameError: name 'bytes' is not defined")),
    "a defaultdict factory that needs an argument": (
        "from collections import defaultdict\nd = defaultdict(list)\nd.default_factory = get_character\nd['A']",
        ("code_runtime", "TypeError: CodeApi.get_character() missing 1 required positional argument: 'name'"),
    ),
}


@pytest.mark.parametrize("name", list(CONTAINED), ids=list(CONTAINED))
def test_an_attack_is_contained(pool: SandboxPool, context: CodeContext, name: str) -> None:
    body, (kind, message) = CONTAINED[name]
    found_kind, text = verdict(pool, context, body_code(body))
    assert found_kind == kind
    assert text.startswith(message) if message.endswith("0x") else text == message


HARMLESS = {
    "super of a flag class reaches int's methods only": (
        "print(super(re.RegexFlag, re.RegexFlag).from_bytes(b'\\x01', 'big'))",
        "re.TEMPLATE\n",
    ),
    "an own attribute shadowing an exception method": (
        "class E(Exception):\n    pass\ne = E()\ne.with_traceback = 1\nprint(e.with_traceback)",
        "1\n",
    ),
    "format_map with a defaultdict": (
        "from collections import defaultdict\nprint('{x}'.format_map(defaultdict(lambda: 'd')))",
        "d\n",
    ),
    "percent formatting with an API object": ("print('%(a)s' % {'a': get_character('A')})", "Character(name='A')\n"),
    "numpy callbacks get arrays": (
        "print(np.apply_along_axis(lambda r: r.sum(), 0, np.ones((2, 2))))\n"
        "print(np.piecewise(np.arange(3.0), [np.arange(3) > 0], [lambda v: v * 2, 0]))",
        "[2. 2.]\n[0. 2. 4.]\n",
    ),
    "re callbacks get matches": ("print(re.compile('(a)').sub(lambda m: m.re.pattern, 'a'))", "(a)\n"),
    "an own class attribute called mro, written": ("class M:\n    pass\nM.mro = 1", ""),
}


@pytest.mark.parametrize("name", list(HARMLESS), ids=list(HARMLESS))
def test_a_harmless_use_runs(pool: SandboxPool, context: CodeContext, name: str) -> None:
    body, printed = HARMLESS[name]
    assert verdict(pool, context, body_code(body)) == ("ok", printed)


# --- odd entry points -------------------------------------------------------------------------------------------------

ENTRY_POINTS = {
    "np.vectorize(len)": ("code_runtime", "TypeError: object of type 'CodeApi' has no len()"),
    "Counter": ("code_runtime", "TypeError: 'CodeApi' object is not iterable"),
    "re.compile('x').sub": ("code_no_entry", "TypeError: sub() missing required argument 'string' (pos 2)"),
    "type(self)": ("code_policy", "the class CodeApi cannot be called in plan code"),
    "super": ("code_runtime", "TypeError: super() argument 1 must be a type, not CodeApi"),
    "getattr": ("code_no_entry", "TypeError: Guards.getattr_builtin() missing 1 required positional argument: 'name'"),
    "np.float64": ("code_runtime", "TypeError: float() argument must be a string or a real number, not 'CodeApi'"),
    "open": ("code_policy", "open() is not available in plan code"),
    "np.frompyfunc(len, 1, 1)": ("code_runtime", "TypeError: object of type 'CodeApi' has no len()"),
    "type(re.I)": (
        "code_runtime",
        "ValueError: <edsb.sandbox.code_api.CodeApi object at 0x",
    ),
    "type(lambda: 0)": ("code_no_entry", "TypeError: function() missing required argument 'globals' (pos 2)"),
    "type(iter([]))": ("code_no_entry", "TypeError: cannot create 'list_iterator' instances"),
    "re.compile": ("code_runtime", "TypeError: first argument must be string or compiled pattern"),
    "List": ("code_runtime", "TypeError: Type List cannot be instantiated; use list() instead"),
    "classmethod(len)": ("code_no_entry", "TypeError: first argument must be callable"),
    "itertools.count": ("code_runtime", "TypeError: a number is required"),
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS), ids=list(ENTRY_POINTS))
def test_an_odd_entry_point_is_the_models_error(pool: SandboxPool, context: CodeContext, entry: str) -> None:
    """`parse_event` bound to a builtin, a numpy callable, a class view...: `inspect.signature` and the call fail
    as the model's errors, never as edsb's."""
    code = f"from collections import Counter\nimport itertools\nparse_event = {entry}\n"
    kind, message = ENTRY_POINTS[entry]
    found = verdict(pool, context, code)
    assert (found[0], found[1].startswith(message) if message.endswith("0x") else found[1] == message) == (kind, True)


# --- deeply nested code -----------------------------------------------------------------------------------------------

ELIF_CHAIN = "n = 399\nif n == 0:\n    k = 0\n" + "".join(f"elif n == {i}:\n    k = {i}\n" for i in range(1, 400))
DEEP = {
    "a sum of 300 terms": ("print(" + " + ".join(["1"] * 300) + ")", ("ok", "300\n")),
    "a 400-branch elif chain": (ELIF_CHAIN + "print(k)", ("ok", "399\n")),
    "900 unary minus signs": ("print(" + "-" * 900 + "1)", ("ok", "1\n")),
    "a concatenation of 300 strings": ("print(len(" + " + ".join(["'a'"] * 300) + "))", ("ok", "300\n")),
    "3000 unary minus signs": ("x = " + "-" * 3000 + "1", ("code_syntax", "RecursionError: the code is nested x")),
}


@pytest.mark.parametrize("name", list(DEEP), ids=list(DEEP))
def test_code_that_compiles_is_not_refused_for_its_nesting(pool: SandboxPool, context: CodeContext, name: str) -> None:
    """The policy's transformer needs a few frames per level of nesting where `compile` needs one: code that
    compiles failed there, as the model's `RecursionError`, though the reference runs it. Code too deep for
    `compile` itself is still a syntax error."""
    body, (kind, message) = DEEP[name]
    found = verdict(pool, context, body_code(body))
    if message.endswith(" x"):
        assert (found[0], found[1].startswith(message[:-2])) == (kind, True), found
    else:
        assert found == (kind, message)


# --- recursion through library callbacks --------------------------------------------------------------------------

RECURSIONS = {
    "frompyfunc": "def f(x):\n    return u(x)\nu = np.frompyfunc(f, 1, 1)\nu(1)",
    "vectorize": "def f(x):\n    return v(x)\nv = np.vectorize(f)\nv(1)",
    "sorted key": "def f(x):\n    return sorted([x], key=f)\nf(1)",
    "re.sub callback": "def f(m):\n    return re.sub('a', f, 'a')\nf(1)",
    "apply_along_axis": "def f(x):\n    return np.apply_along_axis(f, 0, np.ones(1))\nf(1)",
    "array2string formatter": "def f(x):\n    return np.array2string(np.ones(1), formatter={'all': f})\nf(1)",
    "defaultdict factory": (
        "from collections import defaultdict\nd = defaultdict()\ndef f():\n    return d['x']\n"
        "d.default_factory = f\nd['y']"
    ),
    "fromfunction": "def f(x):\n    return np.fromfunction(f, (1,))\nf(1)",
    "piecewise": "def f(*a):\n    return np.piecewise(np.ones(1), [True], [f])\nf(1)",
}


@pytest.mark.parametrize("name", list(RECURSIONS), ids=list(RECURSIONS))
def test_recursion_through_a_library_callback_is_the_models_runtime_error(
    pool: SandboxPool, context: CodeContext, name: str
) -> None:
    """Each level passes through C code (numpy's loops, `sorted`, `re`): the stack holds until Python's limit."""
    kind, message = verdict(pool, context, body_code(RECURSIONS[name]))
    assert (kind, message.startswith("RecursionError: maximum recursion depth exceeded")) == ("code_runtime", True)


# --- a crash of the run's process -------------------------------------------------------------------------------------

DEEP_TUPLE = "t = ()\nfor i in range(10 ** 6):\n    t = (t,)\n"
CRASHES = {
    "hash of a deeply nested tuple": DEEP_TUPLE + "hash(t)",
    "a deeply nested tuple as a character name": DEEP_TUPLE + "get_character(t).set_target_action('eat')",
    "a deeply nested tuple in the plan (hashed while packing)": DEEP_TUPLE
    + "get_character('A').set_position([[[[t]]]])",
}


@pytest.mark.parametrize("name", list(CRASHES), ids=list(CRASHES))
def test_a_crash_in_c_code_is_the_models_and_the_next_run_is_unaffected(
    pool: SandboxPool, context: CodeContext, name: str
) -> None:
    """CPython hashes tuples recursively without a depth check: the run's process dies of a segmentation fault,
    which is the model's `code_crash` (never edsb's), and a fresh process serves the next run."""
    assert verdict(pool, context, body_code(CRASHES[name])) == (
        "code_crash",
        "the sandbox process died (end of output, exit status -11)",
    )
    [entry] = plan(
        pool, context, "get_character('A').set_target_action(get_closest_object('table_1', 'chair'))"
    ).characters
    assert (entry.character, entry.target_action) == ("A", "chair_1")


# --- through the real pipeline ----------------------------------------------------------------------------------------

PLAN_OF_CASE = "david = get_character('David')\ndavid.set_target_action('eat')\n"
PIPELINE = {
    "enum_hash_in_packing": (FIXED["enum __hash__ failing in the packing (was internal_error)"][0], "code_policy"),
    "enum_repr_base_exception": (
        FIXED["enum __repr__ raising BaseException in the packing (killed the worker)"][0],
        "code_policy",
    ),
    "refusal_while_rendering": (FIXED["refusal while the exception is rendered"][0], "code_policy"),
    "deep_tuple_hash": (CRASHES["hash of a deeply nested tuple"], "code_crash"),
    "long_double_seat": (
        PLAN_OF_CASE + "david.set_position(get_area_to_sit_on('chair_2'))\ndavid.set_target_action(np.str_('eat'))\n"
        "get_character(np.longdouble(1.5)).set_target_action('idle')",
        None,
    ),
    "sum_of_300_terms": (
        "n = " + " + ".join(["1"] * 300) + "\n" + PLAN_OF_CASE + "david.set_position(get_area_to_sit_on('chair_' + "
        "str(n - 298)))",
        None,
    ),
}


@pytest.fixture(scope="module")
def redteam_pipeline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """One `edsb run` of every program above, each followed by a benign one: program name → its run's record."""
    require_data()
    return restricted_pipeline_records(
        tmp_path_factory.mktemp("redteam-pipeline"), {name: body for name, (body, _) in PIPELINE.items()}
    )


@pytest.mark.parametrize("name", list(PIPELINE), ids=list(PIPELINE))
def test_through_the_pipeline_the_verdict_is_the_models(redteam_pipeline: dict[str, dict], name: str) -> None:
    record, kind = redteam_pipeline[name], PIPELINE[name][1]
    if kind is None:  # code the reference runs: judged like any plan
        assert (record["status"], record["error_kind"]) == ("passed", None), record["error"]
    else:
        assert (record["status"], record["error_kind"]) == ("error", kind), record["error"]
    following = redteam_pipeline[f"benign-{name}"]
    assert (following["status"], following["error"]) == ("passed", None)
