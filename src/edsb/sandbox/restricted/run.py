"""One run under RestrictedPython, in the child: the policy's compile, its guards while the code runs, and blame for
what it raises. Verdicts follow the reference where its `exec` fails (syntax errors, a missing `parse_event`, the
code's exceptions with their class name and message); where the reference would have succeeded only by escaping the
policy (imports, dunder access), the run is `code_policy`.
"""

from __future__ import annotations

import ast
import gc
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any, TypeAlias

from RestrictedPython import compile_restricted_exec

from edsb.results import ErrorKind
from edsb.sandbox.child_answer import error, fault, pack
from edsb.sandbox.code_api import ApiScene, CodeApi
from edsb.sandbox.errors import CodeError, EdsbFault, exception_text
from edsb.sandbox.provenance import MODEL_OPERATION, fault_text
from edsb.sandbox.restricted.blame import is_models_fault, program_code
from edsb.sandbox.restricted.policy import MODEL_OPERATIONS, Guards, PlanCodePolicy, PolicyViolation
from edsb.sandbox.source import ENTRY_NAME, extract_code, prepare_code


def run_restricted(request: dict[str, Any], api_scene: ApiScene) -> dict[str, Any] | str:
    """One run under RestrictedPython: the policy's compile, guards and blame, as the restricted sandbox had them."""
    program = _program(request["reply"])
    guards = Guards(int(request["max_printed_chars"]))
    api = CodeApi(api_scene, dict(request["latest_plans"]))
    try:
        if isinstance(program, Exception):
            raise program  # compiling failed: reported like any failure of the run
        _run(program, api, guards)
        response = pack(api._plan_entries(), guards.printed(), request)
    except CodeError as exc:
        response = error(exc.kind, exc.message)
    except MemoryError:
        response = error(ErrorKind.CODE_MEMORY, "MemoryError")
    except RecursionError as exc:
        response = error(ErrorKind.CODE_RUNTIME, exception_text(exc))
    except EdsbFault as exc:
        response = fault(str(exc))
    except Exception as exc:  # a failure of ours while packing the result
        response = fault(f"the sandbox failed packing the plan: {fault_text(exc)}")
    del api, program
    try:
        _collect_run_garbage()
    except MemoryError:
        return error(ErrorKind.CODE_MEMORY, "MemoryError")
    if guards.violation is not None and (isinstance(response, str) or response["status"] == "error"):
        # A refusal the run's own check came too early for: in a finaliser, or in model code that rendering the
        # exception or packing the plan ran (`repr` of a `Counter` calls its `most_common`, which the code may set).
        return error(ErrorKind.CODE_POLICY, guards.violation)
    return response


def _collect_run_garbage() -> None:
    """Finalise everything a restricted run left behind (generators suspended in `try/finally`, reference cycles)
    before its answer is sent, so that a refusal inside a finaliser is still the run's own `code_policy`."""
    while gc.collect():
        pass


# --- compiling and running one program --------------------------------------------------------------------------------

_Compiled: TypeAlias = tuple[types.CodeType, frozenset[types.CodeType]]

_TOO_DEEP = "RecursionError: the code is nested too deeply to compile"
_TRANSFORM_DEPTH_FACTOR = 20


def _compile(reply: str) -> _Compiled:
    source = prepare_code(extract_code(reply))
    try:
        tree = ast.parse(source, "<string>")
        compile(tree, "<string>", "exec", dont_inherit=True)  # the compiler's own checks ('return' outside function)
    except (SyntaxError, ValueError) as exc:
        raise CodeError(ErrorKind.CODE_SYNTAX, exception_text(exc)) from None
    except RecursionError:
        raise CodeError(ErrorKind.CODE_SYNTAX, _TOO_DEEP) from None
    # The policy's transformer spends a few Python frames per level of nesting where `compile` spends one: code that
    # compiles (a sum of 300 terms, a 300-branch `elif` chain) would fail there, as the model's RecursionError. The
    # depth is bounded by the `compile` above, so a higher limit for the transform costs no stack risk.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit * _TRANSFORM_DEPTH_FACTOR)
    try:
        compiled = compile_restricted_exec(tree, "<string>", policy=PlanCodePolicy)
    except RecursionError:
        raise CodeError(ErrorKind.CODE_SYNTAX, _TOO_DEEP) from None
    finally:
        sys.setrecursionlimit(limit)
    if compiled.errors or compiled.code is None:
        errors = list(compiled.errors) or ["the code could not be compiled"]
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        raise CodeError(ErrorKind.CODE_POLICY, f"{errors[0]}{more}")
    return compiled.code, program_code(compiled.code) | MODEL_OPERATIONS


def _program(reply: str) -> _Compiled | Exception:
    """The reply's compiled program, or what compiling it raised (CodeError, MemoryError, ...), which the run then
    reports as its own failure."""
    try:
        return _compile(reply)
    except Exception as exc:
        return exc


def _run(program: _Compiled, api: CodeApi, guards: Guards) -> None:
    """Run the compiled program's top level, then call `parse_event(self)` as the reference does."""
    code, models = program
    namespace = guards.namespace()
    top_level: dict[str, Any] = {"self": api}
    try:
        exec(code, namespace, top_level)
        entry = _entry_point(top_level, namespace, api)
        with MODEL_OPERATION:  # calling what the model bound to `parse_event` fails as the reference's call does
            entry(api)
    except PolicyViolation as exc:
        if guards.violation is None:  # not a guard's refusal: the model raised the class itself (`raise type(e)()`)
            raise CodeError(ErrorKind.CODE_RUNTIME, exception_text(exc)) from None
    except CodeError:
        raise
    except MemoryError:
        raise
    except RecursionError as exc:
        # The model's: edsb's code never recurses deeply; only the model's code, or what it nested, runs out of stack.
        guards.raise_if_violated()
        raise CodeError(ErrorKind.CODE_RUNTIME, exception_text(exc)) from None
    except BaseException as exc:
        guards.raise_if_violated()
        if not is_models_fault(exc, models):  # raised by edsb's own code, for no reason the model gave
            raise EdsbFault(f"{fault_text(exc)} while the model's code ran") from None
        raise CodeError(ErrorKind.CODE_RUNTIME, exception_text(exc)) from None
    guards.raise_if_violated()


def _entry_point(top_level: dict[str, Any], namespace: dict[str, Any], api: Any) -> Callable[..., Any]:
    """`parse_event` looked up as the reference's `exec` does (local names, then global), bound to `self`."""
    if ENTRY_NAME in top_level:
        entry = top_level[ENTRY_NAME]
    elif ENTRY_NAME in namespace:
        entry = namespace[ENTRY_NAME]
    else:
        raise CodeError(ErrorKind.CODE_NO_ENTRY, f"NameError: name '{ENTRY_NAME}' is not defined")
    if not callable(entry):
        raise CodeError(ErrorKind.CODE_NO_ENTRY, "TypeError: first argument must be callable")
    try:
        inspect.signature(entry).bind(api)
    except ValueError:
        pass  # a builtin without a signature: just call it
    except TypeError:
        # Other signatures are not rewritten (`def parse_event() -> None:`): the call fails while binding its
        # arguments, before any of the body runs, with Python's own message.
        try:
            with MODEL_OPERATION:
                entry(api)
        except TypeError as exc:
            raise CodeError(ErrorKind.CODE_NO_ENTRY, exception_text(exc)) from None
        return lambda _: None  # the signature check was wrong and the call ran: nothing left to do
    return entry
