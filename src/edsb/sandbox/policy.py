"""The RestrictedPython policy and the guards: what model code may write, and the only objects it reaches besides
the code API (a short list of builtins, views of three pure modules, guarded attribute and item access, a capped
`print`).

Compilation refuses imports (except of `math`, `re` and `itertools`), classes and names or attributes starting with
`_`; at run time the guards refuse underscore and inspection attributes (not even through `getattr` or the real
`type`), `str.format`, module objects, and attribute writes except on `Area`. A refusal is remembered by the run's
`Guards` and stays the verdict (`code_policy`) even if the code catches the exception.
"""

from __future__ import annotations

import ast
import builtins
import itertools
import math
import operator
import re
import types
from collections.abc import Callable
from typing import Any, NoReturn

from RestrictedPython import RestrictingNodeTransformer
from RestrictedPython.Guards import guarded_iter_unpack_sequence, guarded_unpack_sequence
from RestrictedPython.transformer import INSPECT_ATTRIBUTES, IOPERATOR_TO_STR, copy_locations

from edsb.results import ErrorKind
from edsb.sandbox.code_api import Area
from edsb.sandbox.errors import CodeError

# --- compilation ------------------------------------------------------------------------------------------------------


class PlanCodePolicy(RestrictingNodeTransformer):
    """RestrictedPython's rules, minus imports and classes, plus constructs common in model code that RestrictedPython
    refuses without a security reason: `d[k] += v`, annotated assignments and `nonlocal`."""

    def visit_Import(self, node: ast.Import) -> Any:
        if all(alias.name in IMPORTABLE_MODULES for alias in node.names):
            return super().visit_Import(node)
        self.error(node, f"import statements are not allowed, except of {_IMPORTABLE_TEXT}")
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom) -> Any:
        star = any(alias.name == "*" for alias in node.names)
        if node.level == 0 and node.module in IMPORTABLE_MODULES and not star:
            return super().visit_ImportFrom(node)
        self.error(node, f"import statements are not allowed, except of {_IMPORTABLE_TEXT}")
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        self.error(node, "class definitions are not allowed in plan code")
        return node

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
        target = node.target
        if isinstance(target, ast.Subscript) and not isinstance(target.slice, ast.Slice):
            call = ast.Call(
                func=ast.Name("_inplace_item_", ast.Load()),
                args=[
                    ast.Constant(IOPERATOR_TO_STR[type(node.op)]),
                    self.visit(target.value),
                    self.visit(target.slice),
                    self.visit(node.value),
                ],
                keywords=[],
            )
            statement = ast.Expr(value=call)
            copy_locations(statement, node)
            return ast.fix_missing_locations(statement)
        return super().visit_AugAssign(node)


# --- guards: the only objects model code reaches besides the API ------------------------------------------------------


def _module_view(module: types.ModuleType) -> types.SimpleNamespace:
    """A module's public functions and constants, without the modules it imported (`re.enum.sys` and the like are
    the classic way out of a sandbox)."""
    return types.SimpleNamespace(
        **{
            name: value
            for name, value in vars(module).items()
            if not name.startswith("_") and not isinstance(value, types.ModuleType)
        }
    )


# Pure modules whose import the reference's unsandboxed `exec` would allow and model code plausibly uses; each is
# handed over as a view without module attributes. The reference's executor also exposes `re` without an import.
IMPORTABLE_MODULES: dict[str, types.SimpleNamespace] = {
    module.__name__: _module_view(module) for module in (math, re, itertools)
}
_IMPORTABLE_TEXT = ", ".join(sorted(IMPORTABLE_MODULES))


class PolicyViolation(Exception):
    pass


_SAFE_BUILTINS = (
    "abs",
    "all",
    "any",
    "bool",
    "callable",
    "chr",
    "dict",
    "divmod",
    "enumerate",
    "filter",
    "float",
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
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "slice",
    "sorted",
    "str",
    "sum",
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
    "super",
    "classmethod",
    "staticmethod",
    "property",
    "object",
    "bytearray",
)
_HARMLESS_BUILTINS: dict[str, Any] = {
    name: getattr(builtins, name) for name in (*_SAFE_BUILTINS, *_SAFE_EXCEPTIONS)
}  # copied for each run
_EXCEPTION_ATTRIBUTES = frozenset({"args", "name", "value"})
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


class Guards:
    """Per-run guard functions and printed-text buffer; remembers the first policy violation."""

    def __init__(self, max_printed_chars: int) -> None:
        self.violation: str | None = None
        self._printed: list[str] = []
        self._printed_room = max_printed_chars

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
        """A fresh global namespace and builtins for one run (the model may rebind names in either)."""
        allowed = dict(_HARMLESS_BUILTINS)
        for name in _REFUSED_BUILTINS:
            allowed[name] = self._refusing(name)
        allowed.update(
            getattr=self.getattr_builtin,
            hasattr=self.hasattr_builtin,
            type=self.type_builtin,
            __import__=self.import_builtin,
        )
        return {
            "__builtins__": allowed,
            "__name__": "plan_code",
            "Area": Area,
            "re": IMPORTABLE_MODULES["re"],
            "_getattr_": self.getattr,
            "_getitem_": _getitem,
            "_getiter_": iter,
            "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
            "_unpack_sequence_": guarded_unpack_sequence,
            "_write_": self.write,
            "_inplacevar_": _inplacevar,
            "_inplace_item_": self.inplace_item,
            "_apply_": _apply,
            "_print_": self.print_collector,
        }

    def _refusing(self, name: str) -> Callable[..., NoReturn]:
        def refused(*args: Any, **kwargs: Any) -> NoReturn:
            self.refuse(f"{name}() is not available in plan code")

        return refused

    def getattr(self, obj: Any, name: Any, default: Any = _MISSING) -> Any:
        if not isinstance(name, str):
            raise TypeError("attribute name must be string")
        if name.startswith("_") or name in INSPECT_ATTRIBUTES:
            self.refuse(f"access to the attribute {name!r} is not allowed")
        if name in ("format", "format_map") and _is_text(obj):
            self.refuse("str.format is not allowed in plan code (use f-strings)")
        if isinstance(obj, BaseException) and name not in _EXCEPTION_ATTRIBUTES:
            self.refuse(f"access to the attribute {name!r} of an exception is not allowed")
        value = getattr(obj, name) if default is _MISSING else getattr(obj, name, default)
        if isinstance(value, types.ModuleType):
            self.refuse(f"access to the module {name!r} is not allowed")
        return value

    def import_builtin(
        self, name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> types.SimpleNamespace:
        view = IMPORTABLE_MODULES.get(name) if level == 0 else None
        if view is None:
            self.refuse(f"importing {name!r} is not allowed (only {_IMPORTABLE_TEXT})")
        return view

    def getattr_builtin(self, obj: Any, name: Any, *default: Any) -> Any:
        if len(default) > 1:
            raise TypeError(f"getattr expected at most 3 arguments, got {2 + len(default)}")
        return self.getattr(obj, name, *default)

    def hasattr_builtin(self, obj: Any, name: Any) -> bool:
        try:
            self.getattr(obj, name)
        except AttributeError:
            return False
        return True

    def type_builtin(self, *args: Any) -> type:
        if len(args) != 1:
            self.refuse("type() with three arguments (making a class) is not allowed in plan code")
        kind = type(args[0])
        if issubclass(kind, type):  # the real `type` would make classes: `type(type(1))('S', (str,), {...})`
            self.refuse("type() of a class is not available in plan code")
        return kind

    def write(self, obj: Any) -> Any:
        if type(obj) in (list, dict, Area):
            return obj
        self.refuse(f"changing a {type(obj).__name__} object is not allowed in plan code")

    def inplace_item(self, op: str, container: Any, key: Any, value: Any) -> None:
        target = self.write(container)
        target[key] = _inplacevar(op, target[key], value)

    def print_collector(self, _getattr_: Any = None) -> _Printer:
        return _Printer(self)

    def keep_printed(self, text: str) -> None:
        if self._printed_room > 0:
            kept = text[: self._printed_room]
            self._printed.append(kept)
            self._printed_room -= len(kept)


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


def _getitem(obj: Any, key: Any) -> Any:
    return obj[key]


def _apply(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return function(*args, **kwargs)


def _inplacevar(op: str, target: Any, value: Any) -> Any:
    try:
        return _INPLACE[op](target, value)
    except KeyError:
        raise TypeError(f"unsupported augmented assignment {op}") from None


#: The code of the guards that perform the model's own operations for it (RestrictedPython turns `a.b`, `a[b]`,
#: `f(*args)`, unpacking, `print` and `d[k] += v` into their calls): an exception raised in one of them is the model's,
#: as if the operation had been written plainly (see `edsb.sandbox.blame`).
MODEL_OPERATIONS: frozenset[types.CodeType] = frozenset(
    function.__code__
    for function in (
        Guards.getattr,
        Guards.getattr_builtin,
        Guards.hasattr_builtin,
        Guards.type_builtin,
        Guards.import_builtin,
        Guards.write,
        Guards.inplace_item,
        _Printer._call_print,
        _Printer.__call__,
        _getitem,
        _apply,
        _inplacevar,
        guarded_unpack_sequence,
        guarded_iter_unpack_sequence,
    )
)
