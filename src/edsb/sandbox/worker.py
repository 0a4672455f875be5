"""The worker's side of the sandbox: a process that serves one request at a time on stdin/stdout, runs the model's
code under RestrictedPython and answers with what it set. Everything here runs inside the worker process only.

At start the worker imports what runs need, refuses to start when the memory limit leaves no room to run code (so a
too-small `--code-memory` is one clear error), then limits its address space (`RLIMIT_AS`), core dumps and file
writes (`RLIMIT_FSIZE` = 0), scrubs `os.environ` and asks to be scheduled as batch work (Linux `SCHED_BATCH`). Per
run it sets a CPU-time backstop (`RLIMIT_CPU`), scrubs the environment again, and builds a fresh namespace, API object
and guards; whatever the run leaves behind is garbage-collected, finalisers included, before its answer is sent, so
none of its code runs during a later run.

Verdicts follow the reference where its `exec` fails: syntax errors, a missing or uncallable `parse_event`, and
exceptions raised by the code keep their class name and message (`KeyError: 'chair_99'`). Where the reference would
have succeeded only by escaping a sandbox (imports, dunder access), we report `code_policy` instead.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import inspect
import json
import math
import os
import pickle
import signal
import socket
import sys
import types
import typing
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeAlias

from RestrictedPython import compile_restricted_exec

from edsb.results import ErrorKind
from edsb.sandbox.blame import MODEL_OPERATION, fault_text, is_models_fault, program_code
from edsb.sandbox.code_api import ApiScene, CodeApi
from edsb.sandbox.errors import CodeError, EdsbFault, exception_text
from edsb.sandbox.policy import MODEL_OPERATIONS, Guards, PlanCodePolicy, PolicyViolation
from edsb.sandbox.source import ENTRY_NAME, extract_code, prepare_code
from edsb.sandbox.wire import (
    HEADER,
    clean_plain,
    encode_plain,
    frame,
    read_blocking,
    replace_surrogates,
    scene_key,
    to_plain,
)


def template_main() -> None:
    """The template process, started by the pool (`pool._Template.start`): prepare once, then fork a worker for each
    request on stdin (a Unix socket that also carries the worker's socket) until stdin closes."""
    import resource

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # stray writes (warnings, C libraries) cannot corrupt the protocol
    os.dup2(devnull, 2)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    control = socket.socket(fileno=0)

    def answer(message: dict[str, Any]) -> None:
        control.sendall(frame(message))

    try:
        _warm_imports()
        memory = int(sys.argv[2])
        in_use = _address_space_in_use()
        if in_use is not None and memory < in_use + _MIN_HEADROOM_BYTES:
            answer({"status": "fatal", "message": _too_little_memory(memory, in_use)})
            return
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write fails with an OSError instead of killing us
        os.environ.clear()
        _yield_to_the_runner()
        _freeze_long_lived_objects()
    except Exception as exc:
        answer({"status": "fatal", "message": exception_text(exc)})
        return
    answer({"status": "ready"})

    scenes: dict[tuple[str, ...], Any] = {}
    unloadable: set[tuple[str, ...]] = set()
    while True:
        header, fds, _, _ = socket.recv_fds(control, HEADER.size, 1)
        if len(header) < HEADER.size:
            rest = read_blocking(control.fileno(), HEADER.size - len(header))
            if not header or rest is None:
                return
            header += rest
        body = read_blocking(control.fileno(), HEADER.unpack(header)[0])
        if body is None:
            return
        command = pickle.loads(body)
        if command["op"] == "reap":
            answer({"status": _reap(int(command["pid"]))})
            continue
        for spec in command["scenes"]:  # scenes some worker used: load them once here, every later fork has them
            if spec not in unloadable:
                try:
                    _api_scene(spec, scenes)
                except Exception:
                    unloadable.add(spec)
        (channel,) = fds
        pid = os.fork()
        if pid == 0:  # the worker
            try:
                control.close()
                _serve_forever(channel, scenes)
            finally:
                os._exit(0)
        os.close(channel)
        answer({"status": "spawned", "pid": pid, "scenes": [key for key in scenes if key[0] == "source"]})


def _reap(pid: int) -> int | None:
    """A worker's exit status, as `Popen.returncode` gives it (minus the signal number if a signal killed it)."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return None
    return os.waitstatus_to_exitcode(status)


def _serve_forever(channel: int, scenes: dict[tuple[str, ...], Any]) -> None:
    """A worker: serve requests on its socket, one at a time, until the parent closes it or a run needs a fresh
    process."""

    def send(message: dict[str, Any] | str) -> None:
        view = memoryview(frame(message))
        while view:
            view = view[os.write(channel, view) :]

    while True:
        header = read_blocking(channel, HEADER.size)
        if header is None:
            return
        body = read_blocking(channel, HEADER.unpack(header)[0])
        if body is None:
            return
        response = _serve(pickle.loads(body), scenes, send)
        send(response)
        if isinstance(response, dict) and response.get("recycle"):
            return


_MIN_HEADROOM_BYTES = 32 << 20  # address space a run needs beyond the worker's own, at the very least


def _address_space_in_use() -> int | None:
    """The worker's current virtual memory size (what RLIMIT_AS counts), where /proc tells it."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def _too_little_memory(limit: int, in_use: int) -> str:
    need = math.ceil((in_use + _MIN_HEADROOM_BYTES) / (1 << 20) / 64) * 64
    return (
        f"the code memory limit of {limit >> 20} MiB is too small: a sandbox worker already uses "
        f"{in_use >> 20} MiB before running any code (use --code-memory {max(need, 256)} or more)"
    )


def _yield_to_the_runner() -> None:
    """Schedule the template, and so every worker forked from it, as batch work (Linux): a worker woken by a request
    then waits for a free core instead of preempting the runner's event loop, which keeps hundreds of runs moving and
    would otherwise wait for each worker's run on a machine with few cores. Priority is unchanged."""
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_BATCH"):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))


def _freeze_long_lived_objects() -> None:
    """Move modules and cached scenes out of the collector's sight: the per-run collection then only scans what the
    run itself created, and stays cheap."""
    gc.collect()
    gc.freeze()


def _clear_shared_caches() -> None:
    """Empty the caches of the modules plan code reaches that keep its values: `typing`'s (`Literal[g]` keeps `g`,
    `List[X]` keeps the run's class `X`), so that nothing of a run outlives it and none of its code (a generator's
    `finally`) runs during a later run."""
    for clear in typing._cleanups:  # type: ignore[attr-defined]  # the cache_clear of every typing cache
        clear()


def _collect_run_garbage() -> None:
    """Finalise everything a run left behind (generators suspended in `try/finally`, reference cycles) now, inside
    the run's own deadline. A finaliser that creates new garbage forever keeps this loop busy until the parent's
    timeout, which is then charged to the run that caused it."""
    while gc.collect():
        pass


def _warm_imports() -> None:
    """Import everything a run may need now, before the limits (and so that no run pays for it)."""
    import resource  # noqa: F401

    import numpy  # noqa: F401

    import edsb.geometry.scene_graph
    import edsb.sandbox.code_api  # noqa: F401


def _serve(
    request: dict[str, Any], scenes: dict[tuple[str, ...], Any], send: Callable[[dict[str, Any]], None]
) -> dict[str, Any] | str:
    import resource

    try:
        api_scene = _api_scene(request["scene"], scenes)
    except MemoryError:
        return {"status": "fatal", "message": "out of memory while loading the scene", "recycle": True}
    except Exception as exc:
        return {"status": "fatal", "message": f"cannot load the scene: {exception_text(exc)}"}
    if request["announce"]:  # the parent's wall-clock limit for the run starts now
        send({"status": "loaded"})

    used = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
    budget = math.ceil(used + float(request["cpu_seconds"]))
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (budget, hard))
    os.environ.clear()
    program = _program(request["reply"])  # first: nothing of the run exists yet (see `_compiled`)
    guards = Guards(int(request["max_printed_chars"]))
    response = _execute(request, program, api_scene, guards)
    try:
        _clear_shared_caches()
        _collect_run_garbage()
    except MemoryError:
        return _error(ErrorKind.CODE_MEMORY, "MemoryError", recycle=True)
    if guards.violation is not None and (isinstance(response, str) or response["status"] == "error"):
        # A refusal the run's own check came too early for: in a finaliser, or in model code that rendering the
        # exception or packing the plan ran (`repr` of a `Counter` calls its `most_common`, which the code may set).
        recycle = isinstance(response, dict) and bool(response.get("recycle"))
        return _error(ErrorKind.CODE_POLICY, guards.violation, recycle=recycle)
    return response


def _execute(
    request: dict[str, Any], program: _Compiled | Exception, api_scene: ApiScene, guards: Guards
) -> dict[str, Any] | str:
    """Run one program and pack what it set (a successful answer as its JSON text); everything it created is
    unreachable once this returns."""
    api = CodeApi(api_scene, dict(request["latest_plans"]))
    try:
        if isinstance(program, Exception):
            raise program  # compiling failed: reported like any failure of the run
        _run(program, api, guards)
        repaired = False

        def plain(value: Any) -> Any:
            nonlocal repaired
            cleaned, changed = clean_plain(to_plain(value))
            repaired = repaired or changed
            return encode_plain(cleaned)

        characters = [
            {
                "character": plain(entry.character),
                "position": plain(entry.position),
                "target_action": plain(entry.target_action),
                "orientation": None if entry.orientation is None else [plain(str(o)) for o in entry.orientation],
            }
            for entry in api._plan_entries()
        ]
        printed = guards.printed()
        output = replace_surrogates(printed)
        repaired = repaired or output is not printed
        plan = json.dumps(characters, allow_nan=True)
        if len(plan) > int(request["max_plan_bytes"]):
            return _error(ErrorKind.CODE_OUTPUT, f"the plan is too large ({len(plan)} bytes)")
        # The JSON of {"status": "ok", "plan": ..., "output": ...}, the plan encoded once.
        flag = ', "repaired": true' if repaired else ""
        response = f'{{"status": "ok", "plan": {plan}, "output": {json.dumps(output)}{flag}}}'
        if len(response) > int(request["max_result_bytes"]):
            return _error(ErrorKind.CODE_OUTPUT, f"the plan and printed text are too large ({len(response)} bytes)")
        return response
    except CodeError as exc:
        return _error(exc.kind, exc.message, recycle=exc.kind == ErrorKind.CODE_MEMORY)
    except MemoryError:
        return _error(ErrorKind.CODE_MEMORY, "MemoryError", recycle=True)
    except RecursionError as exc:
        return _error(ErrorKind.CODE_RUNTIME, exception_text(exc))
    except EdsbFault as exc:
        return _fault(str(exc))
    except Exception as exc:  # a failure of ours while packing the result: never let it kill the loop silently
        return _fault(f"the sandbox failed packing the plan: {fault_text(exc)}")


_MAX_MESSAGE_CHARS = 2000


def _bounded(message: str) -> tuple[str, bool]:
    """A message as the worker sends it: at most `_MAX_MESSAGE_CHARS` characters, valid Unicode (and whether it
    had to be repaired)."""
    if len(message) > _MAX_MESSAGE_CHARS:
        message = message[:_MAX_MESSAGE_CHARS] + "…"
    cleaned = replace_surrogates(message)
    return cleaned, cleaned is not message


def _error(kind: str, message: str, *, recycle: bool = False) -> dict[str, Any]:
    message, repaired = _bounded(message)
    answer = {"status": "error", "kind": str(kind), "message": message, "recycle": recycle}
    return {**answer, "repaired": True} if repaired else answer


def _fault(message: str) -> dict[str, Any]:
    """A fault of edsb, not of the model: the parent raises EdsbFault; the worker is replaced, to be safe."""
    return {"status": "fault", "message": _bounded(message)[0], "recycle": True}


def _api_scene(spec: tuple[Any, ...], cache: dict[tuple[str, ...], Any]) -> Any:
    from edsb.data.benchmark import Benchmark
    from edsb.geometry.scene import load_scene

    key = scene_key(spec)
    if spec[0] == "source":
        if key not in cache:
            cache[key] = ApiScene(load_scene(Benchmark.open(spec[1], perturb=int(spec[3])), spec[2]))
            _freeze_long_lived_objects()
        return cache[key]
    if key not in cache:
        scene = pickle.loads(spec[2])
        cache[key] = scene if isinstance(scene, ApiScene) else ApiScene(scene)
        _freeze_long_lived_objects()
    return cache[key]


# --- compiling and running one program --------------------------------------------------------------------------------

_Compiled: TypeAlias = tuple[types.CodeType, frozenset[types.CodeType]]

# Compiled programs by reply text, most recently used last. Identical replies are common (repeats at a low
# temperature, scripted and cached models), and compiling is most of a short program's cost. Sharing is safe: a code
# object and its constants are immutable, and everything a program can change (functions, defaults, namespaces) is
# created anew when it runs. Compilation failures are cached as the CodeError they raise (they depend on the text
# alone); anything else (RecursionError, MemoryError) is not.
_COMPILED: OrderedDict[str, _Compiled | CodeError] = OrderedDict()
_CACHE_MAX_ENTRIES = 256
_CACHE_MAX_CHARS = 1 << 20  # reply text held in the cache (compiled code takes a few times more)
_CACHE_MAX_REPLY_CHARS = 64 << 10  # longer replies are compiled every time
_cached_chars = 0


def _compiled(reply: str) -> _Compiled:
    """The reply's program, compiled under the policy, and its code objects with the guards that stand for its
    operations (`blame`); CodeError for a syntax or policy error."""
    global _cached_chars
    found = _COMPILED.get(reply)
    if found is None:
        try:
            found = _compile(reply)
        except CodeError as exc:
            found = CodeError(exc.kind, exc.message)  # without the traceback (and the compiler's frames)
        if len(reply) <= _CACHE_MAX_REPLY_CHARS:
            _COMPILED[reply] = found
            _cached_chars += len(reply)
            while len(_COMPILED) > _CACHE_MAX_ENTRIES or _cached_chars > _CACHE_MAX_CHARS:
                _cached_chars -= len(_COMPILED.popitem(last=False)[0])
            # Out of the collector's sight, or every run's collection scans the cache again (which made each call on
            # a new program dearer than without the cache). Nothing of the run exists yet to be frozen with it: the
            # worker compiles before it builds the run's guards and API.
            _freeze_long_lived_objects()
    else:
        _COMPILED.move_to_end(reply)
    if isinstance(found, CodeError):
        raise CodeError(found.kind, found.message)  # a fresh exception: no traceback carried from run to run
    return found


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
        return _compiled(reply)
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
