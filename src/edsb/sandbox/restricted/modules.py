"""The modules plan code may import, and the stand-ins it gets for classes: what the reference's `exec` hands its
code (`np`, `re`, the `typing` names), minus everything that reaches files, memory or the interpreter.

* `math`, `re`, `itertools`, `collections` and `typing`: their public names, without the modules they imported (of
  `collections`, only its containers: `Counter`, `defaultdict`, `deque`, `OrderedDict`). Of `typing`, only
  the names annotations use (`List`, `Optional`, ...); the objects are inert, since the guards refuse any attribute
  of a typing object (`Iterable.register` would change an ABC shared by later runs). Only `List` is pre-bound, as in
  the reference's executor module; the others must be imported.
* `numpy` and `numpy.linalg`: a curated list of array creation, arithmetic, reductions, comparisons, sorting and
  linear algebra. Every numpy callable is wrapped: it never takes or returns an object array (whose loops call the
  elements' methods by name), a class it returns becomes a `ClassView`, and a callable it returns (a `vectorize`
  object, a `frompyfunc` ufunc) is wrapped again. Every callable handed to numpy (`vectorize`, `frompyfunc`,
  `apply_along_axis`, `fromfunction`, `piecewise`'s list, `array2string`'s formatters, ...) is wrapped as a
  `Callback`, which gives it class views in place of the real classes numpy passes on. File, memory-map, ctypes and
  pickle functions (`load`, `save`, `fromfile`, `memmap`, `ctypeslib`, `lib`, `DataSource`, ...) are absent, and
  naming one is a policy violation with a clear message. An array's own attributes are limited to
  `NUMPY_ATTRIBUTES` (no `ctypes`, `tofile`, `dump`, `base`, `data`, ...).
* `ClassView`: what `type()` and attribute access return instead of a class of edsb's code API or of numpy. It
  answers `isinstance`, `issubclass`, `==` and `repr`, converts a value when the class is a numpy scalar type or
  `dtype`, and refuses to construct anything else (a forged API object or character handle, an `ndarray` over a
  buffer) or to reach an attribute.

Views are built per run (by `policy.Guards`), so nothing a run does to them reaches a later run, and every refusal is
recorded by that run's guards. The dunder methods here perform the model's own operations (an attribute lookup, a
call); their code is listed in `MODEL_OPERATIONS`, so what they raise is the model's (`edsb.sandbox.blame`).
"""

from __future__ import annotations
import __future__

import collections
import itertools
import math
import re
import string
import types
import typing
from collections.abc import Callable
from typing import Any, NoReturn, Protocol

import numpy as np

from edsb.sandbox.restricted.blame import program_code


class Guarding(Protocol):
    """What a view needs of the run's guards (`policy.Guards`)."""

    def refuse(self, message: str) -> NoReturn: ...

    def public(self, value: Any) -> Any: ...

    def is_own_instance(self, value: Any) -> bool: ...


# --- what each module offers ------------------------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    return text.split()


_NUMPY_NAMES = _words(
    """
array asarray asanyarray ascontiguousarray zeros ones full empty eye identity zeros_like ones_like full_like
empty_like copy arange linspace logspace meshgrid abs absolute fabs sign sqrt cbrt square power exp exp2 expm1 log
log2 log10 log1p sin cos tan arcsin arccos arctan arctan2 hypot sinh cosh tanh degrees radians deg2rad rad2deg floor
ceil trunc rint round around fix clip minimum maximum fmin fmax add subtract multiply divide true_divide
floor_divide mod remainder fmod negative positive reciprocal divmod gcd lcm sum prod cumsum cumprod mean median
average std var min max amin amax ptp argmin argmax nanmin nanmax nanmean nansum nanargmin nanargmax nanmedian
nanstd percentile quantile dot vdot inner outer matmul cross tensordot einsum trace diag diagonal triu tril reshape
ravel transpose swapaxes moveaxis squeeze expand_dims atleast_1d atleast_2d atleast_3d stack vstack hstack dstack
column_stack concatenate split array_split append insert delete flip fliplr flipud roll tile repeat broadcast_to
broadcast_arrays sort argsort lexsort partition argpartition searchsorted unique where nonzero argwhere flatnonzero
count_nonzero extract select piecewise choose take put place putmask copyto all any isnan isinf isfinite isclose
allclose array_equal array_equiv equal not_equal less less_equal greater greater_equal logical_and logical_or
logical_not logical_xor isin intersect1d union1d setdiff1d setxor1d nan_to_num interp diff gradient convolve
histogram bincount digitize cov corrcoef shape ndim size result_type can_cast issubdtype promote_types vectorize
frompyfunc apply_along_axis fromfunction fromiter array2string array_repr array_str format_float_positional
format_float_scientific unravel_index ravel_multi_index indices ndindex ndenumerate float16 float32 float64
longdouble int8 int16 int32 int64 uint8 uint16 uint32 uint64 intp uintp int_ uint bool_ bool complex64 complex128
str_ bytes_ generic number integer signedinteger unsignedinteger floating complexfloating inexact dtype ndarray
finfo iinfo pi e inf nan newaxis euler_gamma
"""
)
_LINALG_NAMES = _words(
    """
norm det inv solve eig eigh eigvals eigvalsh svd lstsq pinv matrix_rank qr cholesky slogdet matrix_power multi_dot
cond cross outer vector_norm matrix_norm LinAlgError
"""
)
#: Why the best-known absent numpy names are absent (named in the refusal).
_NUMPY_DANGERS = {
    **dict.fromkeys(
        ("load", "save", "savez", "savez_compressed", "savetxt", "loadtxt", "genfromtxt", "fromfile", "fromregex"),
        "it reads or writes files",
    ),
    **dict.fromkeys(("memmap", "frombuffer", "from_dlpack", "ctypeslib", "lib"), "it reaches raw memory"),
    **dict.fromkeys(("DataSource",), "it opens files and URLs"),
    **dict.fromkeys(("random", "seterr", "set_printoptions", "printoptions", "errstate"), "it changes shared state"),
}
#: Attributes of numpy objects (arrays, scalars, dtypes, finfo, result tuples) that plan code may read. Not there:
#: `ctypes`, `data`, `base`, `tofile`, `dump`, `dumps`, `view`, `getfield`, `setfield`, `setflags`, `strides`, ...
NUMPY_ATTRIBUTES = frozenset(
    _words(
        """
T mT all any argmax argmin argpartition argsort astype choose clip compress conj conjugate copy cumprod cumsum
diagonal dot dtype fill flatten imag item itemsize max mean min nbytes ndim nonzero partition prod put ravel real
repeat reshape round searchsorted shape size sort squeeze std sum swapaxes take tolist trace transpose var flat
is_integer as_integer_ratio name kind char num type str byteorder eps epsneg max min tiny smallest_normal resolution
bits precision dtype reduce accumulate outer eigenvalues eigenvectors U S Vh Q R L sign logabsdet values counts
indices inverse_indices
"""
    )
)
_TYPING_NAMES = _words(
    """
Any Callable Dict FrozenSet Iterable Iterator List Literal Mapping Optional Sequence Set Tuple Type Union
"""
)
PREBOUND_TYPING = ("List",)  # what the reference's executor module binds (`from typing import List`)
#: The containers of `collections` (not `namedtuple`, which makes classes, or `UserString`, whose `format` walks).
CONTAINERS = {
    "Counter": collections.Counter,
    "defaultdict": collections.defaultdict,
    "deque": collections.deque,
    "OrderedDict": collections.OrderedDict,
}

_CONSTRUCTIBLE = (np.generic, np.dtype, np.finfo, np.iinfo, np.vectorize, np.ndindex, np.ndenumerate)


def _members(module: types.ModuleType, names: list[str] | None = None) -> dict[str, Any]:
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_") and not isinstance(v, types.ModuleType)]
    return {name: getattr(module, name) for name in names}


class _Spec:
    """What one importable module offers: its members (numpy ones wrapped when handed out) and its submodules."""

    def __init__(
        self,
        name: str,
        module: types.ModuleType,
        members: dict[str, Any],
        *,
        numpy: bool = False,
        submodules: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.module = module
        self.members = members
        self.numpy = numpy
        self.submodules = submodules


SPECS: dict[str, _Spec] = {
    spec.name: spec
    for spec in (
        _Spec("math", math, _members(math)),
        _Spec("re", re, _members(re)),
        _Spec("itertools", itertools, _members(itertools)),
        _Spec("collections", collections, _members(collections, list(CONTAINERS))),
        _Spec("typing", typing, _members(typing, _TYPING_NAMES)),
        _Spec("numpy", np, _members(np, _NUMPY_NAMES), numpy=True, submodules=("linalg",)),
        _Spec("numpy.linalg", np.linalg, _members(np.linalg, _LINALG_NAMES), numpy=True),
        _Spec("__future__", __future__, _members(__future__)),  # `from __future__ import annotations`
    )
}
IMPORTABLE_TEXT = ", ".join(sorted(name for name in SPECS if not name.startswith("_")))


def absent_member_message(module: str, name: str) -> str | None:
    """Why `module.name` is refused, if the real module has it (None if it has no such name)."""
    spec = SPECS[module]
    if not hasattr(spec.module, name) and not (spec.numpy and name in _NUMPY_DANGERS):
        return None
    why = _NUMPY_DANGERS.get(name, "it is not among the functions plan code may use") if spec.numpy else None
    return f"{module}.{name} is not available in plan code" + (f" ({why})" if why else "")


# --- views handed to model code ---------------------------------------------------------------------------------------


class ModuleView:
    """A module as plan code sees it (`np`, `re`, `typing`, ...): only the members of its `_Spec`."""

    __slots__ = ("_cache", "_guards", "_spec")

    def __init__(self, spec: _Spec, guards: Guarding) -> None:
        object.__setattr__(self, "_spec", spec)
        object.__setattr__(self, "_guards", guards)
        object.__setattr__(self, "_cache", {})

    def __getattr__(self, name: str) -> Any:
        cache = self._cache
        if name in cache:
            return cache[name]
        spec = self._spec
        if name in spec.submodules:
            value: Any = ModuleView(SPECS[f"{spec.name}.{name}"], self._guards)
        elif name in spec.members:
            value = spec.members[name]
            if spec.numpy and callable(value) and not _is_exception_class(value):
                value = self._guards.public(value) if isinstance(value, type) else NumpyFunction(value, self._guards)
        elif name.startswith("_") or (message := absent_member_message(spec.name, name)) is None:
            raise AttributeError(f"module '{spec.name}' has no attribute '{name}'")
        else:
            self._guards.refuse(message)
        cache[name] = value
        return value

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"module '{self._spec.name}' attributes are read-only in plan code")

    def __repr__(self) -> str:
        return f"<module '{self._spec.name}'>"

    @property
    def __name__(self) -> str:  # what `np.__name__` reads, and what an import error names
        return self._spec.name


class NumpyFunction:
    """A numpy callable (function, ufunc, bound array method) as plan code calls it: class views in the arguments
    become the classes again, and no object array goes in or comes out."""

    __slots__ = ("_function", "_guards")

    def __init__(self, function: Callable[..., Any], guards: Guarding) -> None:
        self._function = function
        self._guards = guards

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        guards = self._guards
        values = (*args, *kwargs.values())
        for value in values:
            if is_object_array(value):
                guards.refuse(OBJECT_ARRAY_MESSAGE)
        # numpy calls a method of the same name on an object of the run's classes (`np.sum(x, dtype=...)` calls
        # `x.sum(dtype=...)`): the arguments then stay as plan code holds them, class views included.
        unwrap = not any(guards.is_own_instance(value) for value in values)
        args = tuple(_argument(a, guards, unwrap) for a in args)
        kwargs = {key: _argument(value, guards, unwrap) for key, value in kwargs.items()}
        return numpy_result(self._function(*args, **kwargs), guards)

    def __getattr__(self, name: str) -> Any:
        """`np.add.reduce` and the like: a ufunc's methods, wrapped too."""
        if name in ("reduce", "accumulate", "outer") and isinstance(self._function, np.ufunc):
            return NumpyFunction(getattr(self._function, name), self._guards)
        if name.startswith("_") or not hasattr(self._function, name):
            raise AttributeError(f"'{type(self._function).__name__}' object has no attribute '{name}'")
        self._guards.refuse(f"the attribute {name!r} of a numpy function is not available in plan code")

    def __repr__(self) -> str:
        return repr(self._function)

    @property
    def __name__(self) -> str:
        return str(getattr(self._function, "__name__", type(self._function).__name__))


OBJECT_ARRAY_MESSAGE = "numpy arrays of Python objects (dtype=object) are not available in plan code"


def is_object_array(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.hasobject


def numpy_result(value: Any, guards: Guarding) -> Any:
    """What a numpy call returns, checked: no object array (also inside a returned tuple or list), no real class."""
    if is_object_array(value):
        guards.refuse(OBJECT_ARRAY_MESSAGE)
    if isinstance(value, tuple | list) and any(is_object_array(item) for item in value):  # `unique`, `svd`...
        guards.refuse(OBJECT_ARRAY_MESSAGE)
    if isinstance(value, type):
        return guards.public(value)
    if callable(value) and type(value) is not Callback and type(value) is not ClassView:
        return NumpyFunction(value, guards)  # `np.frompyfunc`'s ufunc, `np.vectorize(f)`: calling it is checked too
    return value


class Callback:
    """A callable of plan code as numpy calls it back (`np.vectorize(f)`, `np.apply_along_axis(f, ...)`, a
    formatter): the classes numpy passes it (a `dtype`, an extra argument it forwards) arrive as class views, as
    everywhere else in plan code."""

    __slots__ = ("_function", "_guards")

    def __init__(self, function: Callable[..., Any], guards: Guarding) -> None:
        self._function = function
        self._guards = guards

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        public = self._guards.public
        return self._function(*(public(a) for a in args), **{key: public(v) for key, v in kwargs.items()})

    def __repr__(self) -> str:
        return repr(self._function)

    @property
    def __name__(self) -> str:  # what `np.vectorize` and `np.frompyfunc` name their result after
        name = getattr(self._function, "__name__", None)
        return name if isinstance(name, str) else type(self._function).__name__


def _is_callback(value: Any) -> bool:
    """A callable numpy may call back, as opposed to a class or a class view (a `dtype`), which numpy converts."""
    return callable(value) and not isinstance(value, type) and type(value) is not ClassView


def _argument(value: Any, guards: Guarding, unwrap: bool) -> Any:
    """An argument of a numpy call as numpy gets it: a class view of a scalar type becomes the class again (numpy
    needs it, unless it hands it on to plan code), and every callable, alone or in a list, tuple or dict
    (`piecewise`'s functions, `array2string`'s formatters), becomes a `Callback`."""
    if type(value) is ClassView:
        return unwrap_class(value) if unwrap else value
    if _is_callback(value):
        return value if type(value) is Callback else Callback(value, guards)
    kind = type(value)
    if kind is dict and any(_is_callback(v) for v in value.values()):
        return {key: _argument(v, guards, unwrap) for key, v in value.items()}
    if (kind is list or kind is tuple) and any(_is_callback(v) for v in value):
        return kind(_argument(v, guards, unwrap) for v in value)
    return value


def is_numpy_object(value: Any) -> bool:
    """An instance of a numpy type (array, scalar, dtype, finfo, ...), whose attributes `NUMPY_ATTRIBUTES` limits."""
    module = type(value).__module__
    return module == "numpy" or module.startswith("numpy.")


def _is_exception_class(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseException)


def needs_view(cls: type) -> bool:
    """Classes model code never holds: edsb's own (the code API, its handles, the sandbox's helpers) and numpy's;
    exceptions excepted (an `except` clause needs the class), and `Area`, which plan code is given anyway."""
    module = cls.__module__
    if _is_exception_class(cls) and not module.startswith("edsb"):
        return False
    return module == "numpy" or module.startswith(("numpy.", "edsb."))


class ClassView:
    """A class of edsb or numpy as plan code holds it (see the module notes). One per class and run, so that
    `type(a) is type(b)` and `type(x) == np.ndarray` keep their meaning."""

    __slots__ = ("_cls", "_guards")

    def __init__(self, cls: type, guards: Guarding) -> None:
        self._cls = cls
        self._guards = guards

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        cls = self._cls
        if not (cls.__module__.startswith("numpy") and issubclass(cls, _CONSTRUCTIBLE)):
            self._guards.refuse(f"the class {self.name()} cannot be called in plan code")
        return NumpyFunction(cls, self._guards)(*args, **kwargs)

    def __instancecheck__(self, value: Any) -> bool:
        return isinstance(value, self._cls)

    def __subclasscheck__(self, other: Any) -> bool:
        return issubclass(other._cls if type(other) is ClassView else other, self._cls)

    @property
    def dtype(self) -> np.dtype[Any]:
        """What numpy reads when it meets the view where a dtype may stand (`a.dtype == np.float64`,
        `np.zeros(2, dtype=np.float32)`); model code cannot (`Guards.getattr` refuses every attribute of a view)."""
        if not issubclass(self._cls, np.generic):
            raise AttributeError("dtype")
        return np.dtype(self._cls)

    def __repr__(self) -> str:
        return f"<class '{self.name()}'>"

    @property
    def __name__(self) -> str:  # `type(x).__name__`: `Character` for the handle, as the reference's messages show it
        return self._cls.__name__

    def name(self) -> str:
        return class_name(self._cls)


def class_name(cls: type) -> str:
    """A class of edsb or numpy as refusals name it: `Character`, `numpy.float64`."""
    return cls.__name__ if cls.__module__.startswith("edsb") else f"{cls.__module__}.{cls.__qualname__}"


def unwrap_class(value: Any) -> Any:
    """The class behind a view of a numpy scalar type or dtype class, for numpy (`np.issubdtype(x, np.floating)`
    needs the real class). Any other view stays a view: `np.vectorize(type(get_character("A")))` must not get to
    call the real class."""
    if type(value) is ClassView and issubclass(value._cls, np.generic | np.dtype):
        return value._cls
    return value


# --- str.format -------------------------------------------------------------------------------------------------------

_PARSER = string.Formatter()


def check_format_string(template: str, guards: Guarding) -> None:
    """Refuse a format string with a field that walks an attribute or an index (`{0.__class__}`, `{0[k]}`), in the
    template or in any nested spec, and one that cannot be parsed whole. `str.format` renders each field (and the
    fields nested in its spec) before it parses the next, so a walk ahead of a syntax error would run, and its value
    can come back in the error (`int` quotes a bad spec): the whole template is parsed, nested specs included,
    before any of it runs."""
    pending = [template]
    error: ValueError | None = None
    while pending:
        text = pending.pop()
        try:
            for _, field, spec, _ in _PARSER.parse(text):
                if field is not None and ("." in field or "[" in field):
                    guards.refuse(
                        f"the format field {{{field}}} reads an attribute or an item, which plan code may not do "
                        "in a format string"
                    )
                if spec:
                    pending.append(spec)
        except ValueError as exc:
            error = error or exc  # the fields nested in the specs already queued are still checked
    if error is not None:
        guards.refuse(f"the format string cannot be parsed ({error}); plan code may only format with one that can")


class SafeFormat:
    """`text.format`, `text.format_map` (or `str.format` unbound) as plan code calls them: the real method, once
    the format string is checked."""

    __slots__ = ("_guards", "_method", "_text")

    def __init__(self, text: str | None, method: str, guards: Guarding) -> None:
        self._text = text
        self._method = method
        self._guards = guards

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        method = getattr(str, self._method)
        if self._text is None:  # unbound: `str.format(template, ...)`
            if args and isinstance(args[0], str):
                check_format_string(args[0], self._guards)
            return method(*args, **kwargs)
        check_format_string(self._text, self._guards)
        return method(self._text, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<built-in method {self._method} of str object>"


#: The code of the methods above that perform the model's own operations (see the module notes).
MODULE_OPERATIONS: frozenset[types.CodeType] = frozenset().union(
    *(
        program_code(function.__code__)
        for function in (
            ModuleView.__getattr__,
            ModuleView.__setattr__,
            NumpyFunction.__call__,
            NumpyFunction.__getattr__,
            numpy_result,
            Callback.__call__,
            _argument,
            ClassView.__call__,
            ClassView.__instancecheck__,
            ClassView.__subclasscheck__,
            ClassView.dtype.fget,  # type: ignore[attr-defined]
            unwrap_class,
            check_format_string,
            SafeFormat.__call__,
        )
    )
)
