"""The RestrictedPython policy and the guards: what model code may write, and the only objects it reaches besides
the code API (a short list of builtins, views of the importable modules, guarded attribute and item access, a capped
`print`).

Compilation refuses imports (except of the modules in `modules.SPECS`), names or attributes starting with `_`
(`__name__`, `x.__name__` and `x.__class__` may be read, and a class may define `__init__`), metaclasses and class
keywords; at run time the guards refuse underscore and inspection attributes (not even through `getattr`), module
objects, format strings that walk attributes or items (or cannot be parsed), numpy's dangerous attributes, and
attribute writes except on `Area` and the run's own classes. A `super()` object answers under the rules of the object
beneath it, and `__init__` through it only on an instance of the run's own classes (so no shared object, a typing
`Literal` say, can be initialised again).
`type()` never hands out a class of edsb or numpy (`modules.ClassView`), and a real one that numpy hands back (as a
`dtype=` argument to a method it calls by name) has no readable attribute. A refusal is remembered by the run's
`Guards` and stays the verdict (`code_policy`) even if the code catches the exception.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import operator
import types
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np
from RestrictedPython import RestrictingNodeTransformer
from RestrictedPython.Guards import guarded_iter_unpack_sequence, guarded_unpack_sequence
from RestrictedPython.transformer import INSPECT_ATTRIBUTES, IOPERATOR_TO_STR, copy_locations

from edsb.results import ErrorKind
from edsb.sandbox.code_api import Area, CharacterHandle, CodeApi, SceneObject
from edsb.sandbox.errors import CodeError
from edsb.sandbox.restricted.blame import program_code
from edsb.sandbox.restricted.modules import (
    CONTAINERS,
    IMPORTABLE_TEXT,
    MODULE_OPERATIONS,
    NUMPY_ATTRIBUTES,
    OBJECT_ARRAY_MESSAGE,
    PREBOUND_TYPING,
    SPECS,
    ClassView,
    ModuleView,
    NumpyFunction,
    SafeFormat,
    absent_member_message,
    class_name,
    is_numpy_object,
    is_object_array,
    needs_view,
)

# --- compilation ------------------------------------------------------------------------------------------------------


class PlanCodePolicy(RestrictingNodeTransformer):
    """RestrictedPython's rules, with imports of the modules plan code may use and plain classes, plus constructs
    common in model code that RestrictedPython refuses without a security reason: reading `__name__`, `d[k] += v`,
    `obj.attr += v` (the guards check both), annotated assignments and `nonlocal`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._methods: set[int] = set()  # ids of the functions defined directly in a class body
        self._lazy_annotations = False  # the code imported `annotations` from `__future__`

    def visit_Import(self, node: ast.Import) -> Any:
        if all(alias.name in SPECS for alias in node.names):
            return super().visit_Import(node)
        self.error(node, f"import statements are not allowed, except of {IMPORTABLE_TEXT}")
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom) -> Any:
        if node.module == "__future__" and any(alias.name == "annotations" for alias in node.names):
            self._lazy_annotations = True
        star = any(alias.name == "*" for alias in node.names)
        if node.level != 0 or node.module not in SPECS or star:
            self.error(node, f"import statements are not allowed, except of {IMPORTABLE_TEXT}")
            return node
        spec = SPECS[node.module]
        for alias in node.names:
            if alias.name not in spec.members and alias.name not in spec.submodules:
                message = absent_member_message(node.module, alias.name)
                if message is not None:
                    self.error(node, message)
        return super().visit_ImportFrom(node)

    def visit_Name(self, node: ast.Name) -> Any:
        if node.id == "__name__" and isinstance(node.ctx, ast.Load):
            return node  # the module name (not "__main__"), as the reference's exec has it
        return super().visit_Name(node)

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        """The underscore attributes plan code may read: `__name__` and `__class__` (`type(e).__name__` in an error
        message; the guard answers `__class__` as `type()` does), and `super().__init__(...)`, which a class's
        `__init__` needs (the guard checks that it is read from a `super` object)."""
        value = node.value
        readable = node.attr in _READABLE_DUNDERS or (
            node.attr == "__init__"
            and isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "super"
        )
        if not (readable and isinstance(node.ctx, ast.Load)):
            return super().visit_Attribute(node)
        attr = node.attr
        node.attr = "readable_dunder"  # passes the name check; restored below
        new_node = super().visit_Attribute(node)
        assert isinstance(new_node, ast.Call)  # `_getattr_(value, "readable_dunder")`
        new_node.args[1] = ast.copy_location(ast.Constant(attr), new_node.args[1])
        return new_node

    def visit_ClassDef(self, node: ast.ClassDef) -> Any:
        """A plain class: no keywords (metaclasses), and of the dunder methods only `__init__`. RestrictedPython
        makes every class statement call `__metaclass__`, which the guards bind (`Guards.make_class`)."""
        if node.keywords:
            self.error(node, "class keywords (metaclass=...) are not allowed in plan code")
        for statement in node.body:
            if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
                self._methods.add(id(statement))
        return super().visit_ClassDef(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        if node.name.startswith("_") and not (node.name == "__init__" and id(node) in self._methods):
            self.error(node, f'"{node.name}" is not allowed: of the special methods, a class may only define __init__')
            return node
        new_node = super().visit_FunctionDef(node)
        assert isinstance(new_node, ast.FunctionDef)  # RestrictedPython changes the node in place
        return new_node if self._lazy_annotations else self._evaluate_annotations(new_node)

    def _evaluate_annotations(self, node: ast.FunctionDef) -> ast.FunctionDef:
        """RestrictedPython compiles with lazy annotations (its own module imports `annotations` from `__future__`,
        and `compile` inherits that); the reference's `exec` evaluates them when the function is defined, so that
        `def f(x: Optional[int])` is a NameError there unless `Optional` was imported. The annotations, already
        transformed, become the arguments of a last decorator, `_annotations_(...)`, which returns the function
        unchanged: they are evaluated, in the compiler's order, once the decorators are."""
        arguments = node.args
        annotated = [
            *arguments.args,
            *arguments.posonlyargs,
            *([arguments.vararg] if arguments.vararg else []),
            *arguments.kwonlyargs,
            *([arguments.kwarg] if arguments.kwarg else []),
        ]
        values = [arg.annotation for arg in annotated if arg.annotation is not None]
        if node.returns is not None:
            values.append(node.returns)
        if not values:
            return node
        for arg in annotated:
            arg.annotation = None
        node.returns = None
        call = ast.Call(func=ast.Name("_annotations_", ast.Load()), args=values, keywords=[])
        node.decorator_list.append(ast.copy_location(call, values[0]))
        return ast.fix_missing_locations(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        """`x: T = v` runs as `x = v` (annotations are never evaluated); a bare `x: T` does nothing."""
        if node.value is None:
            return ast.copy_location(ast.Pass(), node)
        assign = ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)
        return self.visit(ast.fix_missing_locations(assign))

    def visit_Nonlocal(self, node: ast.Nonlocal) -> ast.AST:
        for name in node.names:
            self.check_name(node, name)
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        """`d[k] += v`, `a[1:] += v` and `obj.attr += v` (in a class of the run) become guard calls that check the
        container or object as a plain write would; RestrictedPython refuses them."""
        target = node.target
        if isinstance(target, ast.Subscript):
            return self._inplace_call(node, "_inplace_item_", target.value, self._key(target.slice))
        if isinstance(target, ast.Attribute):
            self.check_name(node, target.attr)
            return self._inplace_call(node, "_inplace_attr_", target.value, ast.Constant(target.attr))
        return super().visit_AugAssign(node)

    def _key(self, key: ast.expr) -> ast.expr:
        """A subscript as a value: `a[1:, 0]` indexes with `(slice(1, None), 0)`."""
        if isinstance(key, ast.Slice):
            parts = (key.lower, key.upper, key.step)
            bounds = [ast.Constant(None) if part is None else self.visit(part) for part in parts]
            return ast.copy_location(ast.Call(func=ast.Name("_slice_", ast.Load()), args=bounds, keywords=[]), key)
        if isinstance(key, ast.Tuple) and any(isinstance(item, ast.Slice) for item in key.elts):
            return ast.copy_location(ast.Tuple(elts=[self._key(item) for item in key.elts], ctx=ast.Load()), key)
        return self.visit(key)

    def _inplace_call(self, node: ast.AugAssign, guard: str, container: ast.expr, key: ast.expr) -> ast.stmt:
        call = ast.Call(
            func=ast.Name(guard, ast.Load()),
            args=[ast.Constant(IOPERATOR_TO_STR[type(node.op)]), self.visit(container), key, self.visit(node.value)],
            keywords=[],
        )
        statement = ast.Expr(value=call)
        copy_locations(statement, node)
        return ast.fix_missing_locations(statement)


# --- guards: the only objects model code reaches besides the API ------------------------------------------------------


class PolicyViolation(Exception):
    pass


_SAFE_BUILTINS = (
    "abs",
    "all",
    "any",
    "bool",
    "callable",
    "chr",
    "classmethod",
    "dict",
    "divmod",
    "enumerate",
    "filter",
    "float",
    "format",
    "frozenset",
    "hash",
    "id",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "list",
    "map",
    "max",
    "min",
    "next",
    "ord",
    "pow",
    "property",
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "slice",
    "sorted",
    "staticmethod",
    "str",
    "sum",
    "super",
    "tuple",
    "zip",
)
_SAFE_EXCEPTIONS = (
    "ArithmeticError",
    "AssertionError",
    "AttributeError",
    "Exception",
    "IndexError",
    "KeyError",
    "LookupError",
    "NameError",
    "NotImplementedError",
    "RuntimeError",
    "StopIteration",
    "TypeError",
    "ValueError",
    "ZeroDivisionError",
)
_REFUSED_BUILTINS = (
    "open",
    "exec",
    "eval",
    "compile",
    "globals",
    "locals",
    "vars",
    "dir",
    "input",
    "breakpoint",
    "exit",
    "quit",
    "help",
    "memoryview",
    "setattr",
    "delattr",
    "object",
    "bytearray",
)
_HARMLESS_BUILTINS: dict[str, Any] = {
    name: getattr(builtins, name) for name in (*_SAFE_BUILTINS, *_SAFE_EXCEPTIONS)
} | {"__build_class__": builtins.__build_class__}  # copied for each run; classes call `__metaclass__` (the guards)
_EXCEPTION_ATTRIBUTES = frozenset({"args", "name", "value"})
_EXCEPTION_BASES = frozenset(getattr(builtins, name) for name in _SAFE_EXCEPTIONS)
_CLASS_NAMESPACE = frozenset({"__module__", "__qualname__", "__doc__", "__init__", "__classcell__"})
_INPLACE = {
    "+=": operator.iadd,
    "-=": operator.isub,
    "*=": operator.imul,
    "/=": operator.itruediv,
    "//=": operator.ifloordiv,
    "%=": operator.imod,
    "**=": operator.ipow,
    "<<=": operator.ilshift,
    ">>=": operator.irshift,
    "&=": operator.iand,
    "^=": operator.ixor,
    "|=": operator.ior,
    "@=": operator.imatmul,
}
_MISSING = object()
#: Kinds whose attributes need none of the checks below: none is text, an exception, a numpy or typing object or a
#: class, and none of their attributes is a module or a class of edsb or numpy.
_WRITABLE = frozenset({list, dict, Area, *CONTAINERS.values()})
_READABLE_DUNDERS = frozenset({"__name__", "__class__"})
#: Besides underscore names: frames, code and generator internals, and `mro` (a class's bases, never vetted: `object`,
#: `BaseException`, and `enum.Enum` behind `re.RegexFlag`, whose functional API makes classes with any dunder method).
_REFUSED_ATTRIBUTES = INSPECT_ATTRIBUTES | {"mro"}
_PREBOUND_TYPING = {name: SPECS["typing"].members[name] for name in PREBOUND_TYPING}
_PLAIN_KINDS = frozenset({CodeApi, CharacterHandle, SceneObject, Area, ModuleView, list, dict, tuple, set, int, float})


class Guards:
    """Per-run guard functions, views and printed-text buffer; remembers the first policy violation."""

    def __init__(self, max_printed_chars: int) -> None:
        self.violation: str | None = None
        self._printed: list[str] = []
        self._printed_room = max_printed_chars
        self._modules: dict[str, ModuleView] = {}
        self._views: dict[type, ClassView] = {}
        self._classes: set[type] = set()  # the classes the run's code defined
        self._refused = {name: _Refused(self, name) for name in _REFUSED_BUILTINS}

    def refuse(self, message: str) -> NoReturn:
        if self.violation is None:
            self.violation = message
        raise PolicyViolation(message)

    def raise_if_violated(self) -> None:
        if self.violation is not None:
            raise CodeError(ErrorKind.CODE_POLICY, self.violation)

    def printed(self) -> str:
        return "".join(self._printed)

    def namespace(self) -> dict[str, Any]:
        """A fresh global namespace and builtins for one run (the model may rebind names in either), with the names
        the reference's executor module has bound that plan code may use: `re`, `np` and `List`."""
        allowed = dict(_HARMLESS_BUILTINS)
        allowed.update(self._refused)
        allowed.update(
            getattr=self.getattr_builtin,
            hasattr=self.hasattr_builtin,
            type=self.type_builtin,
            __import__=self.import_builtin,
        )
        return {
            "__builtins__": allowed,
            "__name__": "plan_code",
            "__metaclass__": self.make_class,
            "Area": Area,
            "re": self.module("re"),
            "np": self.module("numpy"),
            **_PREBOUND_TYPING,
            "_getattr_": self.getattr,
            "_getitem_": _getitem,
            "_getiter_": iter,
            "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
            "_unpack_sequence_": guarded_unpack_sequence,
            "_write_": self.write,
            "_inplacevar_": _inplacevar,
            "_inplace_item_": self.inplace_item,
            "_inplace_attr_": self.inplace_attr,
            "_slice_": slice,
            "_apply_": _apply,
            "_annotations_": _annotations,
            "_print_": self.print_collector,
        }

    def module(self, name: str) -> ModuleView:
        """The run's view of an importable module (one per run, so `np is numpy`)."""
        view = self._modules.get(name)
        if view is None:
            view = self._modules[name] = ModuleView(SPECS[name], self)
        return view

    def public(self, value: Any) -> Any:
        """`value` as model code may hold it: a class of edsb or numpy becomes its `ClassView`."""
        if not isinstance(value, type) or value is Area or not needs_view(value):
            return value
        view = self._views.get(value)
        if view is None:
            view = self._views[value] = ClassView(value, self)
        return view

    def getattr(self, obj: Any, name: Any, default: Any = _MISSING) -> Any:
        if not isinstance(name, str):
            raise TypeError("attribute name must be string")
        if name in _READABLE_DUNDERS:
            return self._dunder(obj, name, default)
        # A `super()` object finds attributes in the classes of the object beneath it: the same rules apply.
        subject = obj.__self__ if type(obj) is super else obj  # type: ignore[attr-defined]
        special = name == "__init__" and type(obj) is super and type(subject) in self._classes  # super().__init__
        if (name.startswith("_") or name in _REFUSED_ATTRIBUTES) and not special:
            self.refuse(f"access to the attribute {name!r} is not allowed")
        if type(subject) in _PLAIN_KINDS:  # the common case (`self.get_...`, `c.set_position`, `np.array`, `xs.append`)
            return getattr(obj, name) if default is _MISSING else getattr(obj, name, default)
        if type(subject) is ClassView:
            self.refuse(f"the attributes of the class {subject.name()} are not available in plan code")
        if isinstance(subject, type) and subject is not Area and needs_view(subject):  # a real class numpy handed out
            self.refuse(f"the attributes of the class {class_name(subject)} are not available in plan code")
        if name in ("format", "format_map") and _is_text(subject):
            return SafeFormat(subject if isinstance(subject, str) else None, name, self)
        if isinstance(subject, BaseException) and name not in _EXCEPTION_ATTRIBUTES and not self._own(subject, name):
            self.refuse(f"access to the attribute {name!r} of an exception is not allowed")
        numpy = is_numpy_object(subject)
        if numpy:
            if name not in NUMPY_ATTRIBUTES:
                self.refuse(f"the attribute {name!r} of numpy objects is not available in plan code")
            if is_object_array(subject):
                self.refuse(OBJECT_ARRAY_MESSAGE)
        elif _is_typing_object(subject):
            self.refuse(f"the attribute {name!r} of a typing object is not available in plan code")
        value = getattr(obj, name) if default is _MISSING else getattr(obj, name, default)
        if isinstance(value, types.ModuleType):
            self.refuse(f"access to the module {name!r} is not allowed")
        if numpy and callable(value) and not isinstance(value, type):
            return NumpyFunction(value, self)  # a bound array method: checked like numpy's functions
        return self.public(value)

    def _dunder(self, obj: Any, name: str, default: Any) -> Any:
        """`obj.__class__` is `type(obj)`; `obj.__name__` is the name of a class, function or module, a string."""
        if name == "__class__":
            return self.type_builtin(obj)
        found = getattr(obj, "__name__", None)
        if isinstance(found, str):
            return found
        if default is not _MISSING:
            return default
        raise AttributeError(f"'{type(obj).__name__}' object has no attribute '__name__'")

    def _own(self, obj: Any, name: str) -> bool:
        """Whether `name` is an attribute the run's own code gave `obj` (an instance of a class it defined)."""
        if type(obj) not in self._classes:
            return False
        if name in getattr(obj, "__dict__", {}):
            return True
        return any(name in vars(cls) for cls in type(obj).__mro__ if cls in self._classes)

    def import_builtin(
        self, name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> ModuleView | None:
        """An `import` statement of plan code; or numpy's own lazy import, which its C code makes by
        `PyImport_Import` through the builtins of the running frame, the model's (`str(array)` imports numpy's array
        printer on first use). That one gets the real import machinery, so no verdict depends on whether an earlier
        run in the same process made numpy import it. `PyImport_Import` passes the globals as locals too and an
        empty list as `fromlist`, which an import statement never does (the worker runs the code with a locals
        dict of its own; functions pass None), and only uses the module the import leaves in `sys.modules`."""
        if _is_numpys_own_import(name, globals, locals, fromlist, level):
            importlib.import_module(name)
            return None
        if level != 0 or name not in SPECS:
            self.refuse(f"importing {name!r} is not allowed (only {IMPORTABLE_TEXT})")
        # `import numpy.linalg` binds `numpy`; `from numpy.linalg import norm` takes from `numpy.linalg`.
        return self.module(name if fromlist else name.split(".")[0])

    def getattr_builtin(self, obj: Any, name: Any, *default: Any) -> Any:
        if len(default) > 1:
            raise TypeError(f"getattr expected at most 3 arguments, got {2 + len(default)}")
        return self.getattr(obj, name, *default)

    def is_own_instance(self, value: Any) -> bool:
        """Whether `value` is an instance of a class the run's code defined."""
        return type(value) in self._classes

    def hasattr_builtin(self, obj: Any, name: Any) -> bool:
        try:
            self.getattr(obj, name)
        except AttributeError:
            return False
        return True

    def type_builtin(self, *args: Any) -> Any:
        """The class of a value, as model code may hold it: a `ClassView` for edsb's and numpy's classes (so that no
        API object, handle or array can be forged), never the real `type` (which makes classes)."""
        if len(args) != 1:
            self.refuse("type() with three arguments (making a class) is not allowed in plan code")
        kind = type(args[0])
        if issubclass(kind, type):  # the real `type` would make classes: `type(type(1))('S', (str,), {...})`
            self.refuse("type() of a class is not available in plan code")
        return self.public(kind)

    def make_class(self, name: str, bases: tuple[Any, ...], namespace: dict[str, Any], **keywords: Any) -> type:
        """What a class statement of plan code calls (RestrictedPython's `__metaclass__`): a plain class whose bases
        are the run's own classes, the exceptions plan code may raise, or nothing (`object`)."""
        if keywords:
            self.refuse("class keywords are not allowed in plan code")
        kept = []
        for base in bases:
            if base is self._refused["object"]:
                continue  # `class X(object):`
            if not (isinstance(base, type) and (base in self._classes or base in _EXCEPTION_BASES)):
                self.refuse(
                    f"the class {name} may only derive from classes the plan code defined or from the builtin "
                    "exceptions"
                )
            kept.append(base)
        extra = sorted(key for key in namespace if key.startswith("__") and key not in _CLASS_NAMESPACE)
        if extra:
            self.refuse(f"the class {name} defines {extra[0]}, which plan code may not define")
        cls = type(name, tuple(kept), dict(namespace))
        self._classes.add(cls)
        return cls

    def write(self, obj: Any) -> Any:
        kind = type(obj)
        if kind in _WRITABLE or kind in self._classes or (kind is type and obj in self._classes):
            return obj
        if kind is np.ndarray:
            return ArrayItems(obj)  # `a[i] = v`, as numpy code does; not `a.shape = ...` or `a.strides = ...`
        self.refuse(f"changing a {kind.__name__} object is not allowed in plan code")

    def inplace_item(self, op: str, container: Any, key: Any, value: Any) -> None:
        target = self.write(container)
        target[key] = _inplacevar(op, target[key], value)

    def inplace_attr(self, op: str, obj: Any, name: str, value: Any) -> None:
        target = self.write(obj)
        setattr(target, name, _inplacevar(op, self.getattr(target, name), value))

    def print_collector(self, _getattr_: Any = None) -> _Printer:
        return _Printer(self)

    def keep_printed(self, text: str) -> None:
        if self._printed_room > 0:
            kept = text[: self._printed_room]
            self._printed.append(kept)
            self._printed_room -= len(kept)


class ArrayItems:
    """What `_write_` hands back for a numpy array: its items can be set and deleted, its attributes not (they
    would reinterpret its memory: `strides`, `dtype`, `shape`)."""

    __slots__ = ("_array",)
    _array: np.ndarray[Any, Any]  # set once in __init__ (the class refuses attribute writes)

    def __init__(self, array: np.ndarray[Any, Any]) -> None:
        object.__setattr__(self, "_array", array)

    def __getitem__(self, key: Any) -> Any:
        return self._array[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._array[key] = value

    def __delitem__(self, key: Any) -> None:
        raise ValueError("cannot delete array elements")  # numpy's own answer to `del a[i]`

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"numpy array attributes cannot be set in plan code ({name})")


class _Refused:
    """A refused builtin (`open`, `eval`, ...) as plan code sees it: calling it is a policy violation."""

    __slots__ = ("_guards", "_name")

    def __init__(self, guards: Guards, name: str) -> None:
        self._guards = guards
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._guards.refuse(f"{self._name}() is not available in plan code")


class _Printer:
    """What `print` becomes in plan code: text goes to a capped buffer, never to a file."""

    def __init__(self, guards: Guards) -> None:
        self._guards = guards

    def _call_print(
        self, *objects: Any, sep: Any = " ", end: Any = "\n", file: Any = None, flush: bool = False
    ) -> None:
        if file is not None:
            self._guards.refuse("print(file=...) is not allowed in plan code")
        sep = " " if sep is None else sep
        end = "\n" if end is None else end
        if not isinstance(sep, str) or not isinstance(end, str):
            raise TypeError("sep and end must be strings")
        self._guards.keep_printed(sep.join(str(o) for o in objects) + end)

    def __call__(self) -> str:
        return self._guards.printed()


def _is_text(obj: Any) -> bool:
    """A string or a string class (a subclass too): `str.format` walks attributes (`{0.__globals__}`)."""
    return isinstance(obj, str) or (isinstance(obj, type) and issubclass(obj, str))


def _is_typing_object(obj: Any) -> bool:
    """`List`, `Optional[int]`, `Any`...: inert in plan code (their attributes forward to shared classes)."""
    return type(obj).__module__ == "typing" or (isinstance(obj, type) and obj.__module__ == "typing")


def _is_numpys_own_import(name: str, globals: Any, locals: Any, fromlist: Any, level: int) -> bool:
    """An import that numpy's C code asked for (see `Guards.import_builtin`), never one an import statement makes."""
    return (
        (name == "numpy" or name.startswith("numpy."))
        and level == 0
        and locals is globals
        and type(globals) is dict
        and type(fromlist) is list
        and not fromlist
    )


def _getitem(obj: Any, key: Any) -> Any:
    return obj[key]


def _apply(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return function(*args, **kwargs)


def _annotations(*_values: Any) -> Callable[[Any], Any]:
    """The decorator a function's annotations become (`PlanCodePolicy._evaluate_annotations`): evaluated, not kept."""
    return _unchanged


def _unchanged(function: Any) -> Any:
    return function


def _inplacevar(op: str, target: Any, value: Any) -> Any:
    try:
        return _INPLACE[op](target, value)
    except KeyError:
        raise TypeError(f"unsupported augmented assignment {op}") from None


#: The code of the guards that perform the model's own operations for it (RestrictedPython turns `a.b`, `a[b]`,
#: `f(*args)`, unpacking, `print` and `d[k] += v` into their calls): an exception raised in one of them is the model's,
#: as if the operation had been written plainly (see `edsb.sandbox.blame`).
MODEL_OPERATIONS: frozenset[types.CodeType] = (
    frozenset().union(
        *(
            program_code(function.__code__)  # with the code nested in it (`print`'s generator expression)
            for function in (
                Guards.getattr,
                Guards.getattr_builtin,
                Guards._dunder,
                Guards.hasattr_builtin,
                Guards.type_builtin,
                Guards.import_builtin,
                Guards.make_class,
                Guards.public,
                Guards.write,
                ArrayItems.__getitem__,
                ArrayItems.__setitem__,
                ArrayItems.__delitem__,
                ArrayItems.__setattr__,
                Guards.inplace_item,
                Guards.inplace_attr,
                _Printer._call_print,
                _Printer.__call__,
                _getitem,
                _apply,
                _inplacevar,
                guarded_unpack_sequence,
                guarded_iter_unpack_sequence,
            )
        )
    )
    | MODULE_OPERATIONS
)
