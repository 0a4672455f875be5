"""The child's side of the sandbox: a template process that forks one fresh child per run, and the child that
loads its scene, contains itself, runs the model's code once and answers with what it set. Everything here runs in
those processes only.

The template starts with a minimal environment, imports what runs need (`_PRELOADED`), refuses to start when the
memory limit leaves no room to run code (so a too-small `--code-memory` is one clear error), builds the kernel's
filters once (`kernel.prepare`), loads the scenes, asks to be scheduled as batch work (Linux `SCHED_BATCH`) and then
only forks. A child applies `kernel.contain` at once (descriptors, rlimits, an unprivileged user, and Landlock and
seccomp: all of them for `exact`, those the host has for `restricted`), waits for its one request (its scene is the
template's copy or comes with the request), seeds `random` and `numpy.random` from the run's seed, runs the code and
exits: nothing a run changes (a patched module, a cache, a thread, the random state) outlives it.

`exact` runs the code with CPython's own `exec`, as the reference does (`exact`); every failure is the model's.
`restricted` runs it under RestrictedPython: verdicts follow the reference where its `exec` fails (syntax errors, a
missing `parse_event`, the code's exceptions with their class name and message), and where the reference would have
succeeded only by escaping the policy (imports, dunder access), the run is `code_policy`.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import inspect
import io
import json
import math
import os
import pickle
import signal
import socket
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from edsb.results import ErrorKind
from edsb.sandbox import exact, kernel
from edsb.sandbox.blame import MODEL_OPERATION, fault_text, is_models_fault, program_code
from edsb.sandbox.code_api import ApiScene, CodeApi, PlanEntry
from edsb.sandbox.errors import CodeError, EdsbFault, exception_text
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

if TYPE_CHECKING:  # the restricted sandbox's modules (RestrictedPython): imported by a template that runs it only
    from edsb.sandbox.policy import Guards


def template_main() -> None:
    """The template process, started by the pool (`pool._Template.start`): prepare once, then fork a child for each
    request on stdin (a Unix socket that also carries the child's socket) until stdin closes. It never runs model
    code; each child serves one run and exits."""
    import resource

    # The control socket comes as stdin: moved off descriptor 0, which becomes /dev/null like 1 and 2 (stray writes,
    # warnings and C libraries cannot corrupt the protocol, and every child's standard streams are plain files).
    control = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process

    def answer(message: dict[str, Any]) -> None:
        control.sendall(frame(message))

    try:
        _warm_imports(sys.argv[4])
        memory = int(sys.argv[2])
        in_use = _address_space_in_use()
        if in_use is not None and memory < in_use + _MIN_HEADROOM_BYTES:
            answer({"status": "fatal", "message": _too_little_memory(memory, in_use)})
            return
        if sys.platform.startswith("linux"):  # the layers this host has, built once here, applied in every child
            kernel.prepare(protected=json.loads(sys.argv[3]))
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
    unloadable: dict[tuple[str, ...], str] = {}
    while True:
        header, fds, _, _ = socket.recv_fds(control, HEADER.size, _MAX_BATCH)
        if len(header) < HEADER.size:
            rest = read_blocking(control.fileno(), HEADER.size - len(header))
            if not header or rest is None:
                return
            header += rest
        body = read_blocking(control.fileno(), HEADER.unpack(header)[0])
        if body is None:
            return
        command = pickle.loads(body)
        for pid in command.get("done", ()):  # children the parent killed after their answer: reap them
            _reap(int(pid))
        if command["op"] == "reap":
            answer({"status": _reap(int(command["pid"]))})
            continue
        for spec in command["scenes"]:  # the benchmark scenes runs asked for: unpickled once, every fork has them
            key = scene_key(spec)
            if key not in unloadable and key not in scenes:
                try:
                    _api_scene(spec, scenes)
                except Exception as exc:
                    unloadable[key] = f"cannot load the scene in the sandbox: {exception_text(exc)}"
        pids: list[int | None] = []
        failure = ""
        for channel in fds:
            pid, failure = _fork() if not failure else (None, failure)
            if pid is None:  # the kernel refuses: this channel gets no child, the parent is told why
                os.close(channel)
                pids.append(None)
                continue
            if pid == 0:  # the child: one run, then exit
                try:
                    control.close()
                    for other in fds:
                        if other != channel:
                            with contextlib.suppress(OSError):
                                os.close(other)
                    _serve_one(channel, scenes, command["settings"])
                finally:
                    os._exit(0)
            os.close(channel)
            pids.append(pid)
            _cpu_limits[pid] = math.ceil(float(command["settings"]["cpu_seconds"])) + kernel.CPU_GRACE_SECONDS
        held = [key for key in scenes if key[0] == "held"]
        spawned = {"status": "spawned", "pids": pids, "scenes": held, "unloadable": list(unloadable.items())}
        answer({**spawned, "message": failure} if failure else spawned)


_FORK_PATIENCE = 5.0  # seconds the template retries a refused fork (EAGAIN: a pids limit, reached for a while)


def _fork() -> tuple[int | None, str]:
    """`os.fork()`, retried with a growing pause while the kernel refuses (a container's pids limit, filled by
    threads that die with their runs' timeouts): (pid, "") or (None, why). The template never dies of it."""
    import time

    pause, waited = 0.01, 0.0
    while True:
        try:
            return os.fork(), ""
        except OSError as exc:
            if waited >= _FORK_PATIENCE:
                return None, f"cannot fork: {exception_text(exc)}"
        time.sleep(pause)
        waited += pause
        pause = min(pause * 2, 0.5)


_MAX_BATCH = 64  # children forked per request at most (the pool asks for as many as it lacks, `size` at most)


# Each live child's hard CPU limit (seconds), to tell the kernel's kill at that limit from any other SIGKILL.
_cpu_limits: dict[int, int] = {}


def _reap(pid: int) -> int | None:
    """A child's exit status, as `Popen.returncode` gives it (minus the signal number if a signal killed it). A
    SIGKILL that came with the child's CPU time past its soft limit is the kernel's CPU limit (threads that ignore
    SIGXCPU spend CPU faster than the wall clock runs, and die at the hard limit), reported as SIGXCPU so that the
    run is a timeout, not the out-of-memory kill a bare SIGKILL stands for. Past the soft limit, not at the hard
    one: the usage `wait4` reports is sampled, and fell 0.1-0.15 s short of the hard limit on a loaded host."""
    limit = _cpu_limits.pop(pid, None)
    try:
        _, status, usage = os.wait4(pid, 0)
    except ChildProcessError:
        return None
    code = os.waitstatus_to_exitcode(status)
    if (
        code == -signal.SIGKILL
        and limit is not None
        and usage.ru_utime + usage.ru_stime >= limit - kernel.CPU_GRACE_SECONDS
    ):
        return -signal.SIGXCPU
    return code


def _serve_one(channel: int, scenes: dict[tuple[str, ...], Any], settings: dict[str, Any]) -> None:
    """A child: contain itself at once (it holds the template's scenes, so it needs no file of the data), tell the
    parent so (every later frame is untrusted), then wait for its one request, run the code, answer, return (to
    exit). Containing before the request keeps it off the run's path: the child waits for work already contained."""

    def send(message: dict[str, Any] | str) -> None:
        view = memoryview(frame(message))
        while view:
            view = view[os.write(channel, view) :]

    exact = settings["sandbox"] == "exact"
    try:
        kernel.contain(_containment(settings, channel, exact))
    except Exception as exc:  # fail closed: no layer, no run
        send({"status": "fatal", "message": f"cannot contain the run: {exception_text(exc)}"})
        return
    send({"status": "contained"})
    header = read_blocking(channel, HEADER.size)
    if header is None:
        return
    body = read_blocking(channel, HEADER.unpack(header)[0])
    if body is None:
        return
    request = pickle.loads(body)
    try:  # the template's copy, or an inline scene (the parent's own pickle): no file is opened
        api_scene = _api_scene(request["scene"], scenes)
    except MemoryError:
        send(_error(ErrorKind.CODE_MEMORY, "MemoryError: out of memory while unpacking the scene"))
        return
    except Exception as exc:  # edsb's, not the model's: its class cannot be imported here, say (never silent)
        send({"status": "fatal", "message": f"cannot load the scene in the sandbox: {exception_text(exc)}"})
        return
    if request["scene"][0] != "held":  # still edsb's frame (no model code has run): the parent trusts it
        send({"status": "loaded"})
    _seed(int(request["seed"]))
    send(_run_exact(request, api_scene) if exact else _run_restricted(request, api_scene))


def _containment(request: dict[str, Any], channel: int, exact: bool) -> kernel.Containment:
    """Every layer for the exact sandbox (`contain` fails when one is missing); for the restricted one, the layers
    the host supports (descriptors, limits and the privilege drop on any POSIX host)."""
    layers: dict[str, bool] = {}
    if not exact:
        support = kernel.host_support()
        abi = support.landlock_abi
        layers = {"landlock": abi is not None and abi >= kernel.MIN_LANDLOCK_ABI, "seccomp": support.seccomp}
    return kernel.Containment(
        memory_bytes=int(request["memory_bytes"]),
        cpu_seconds=math.ceil(float(request["cpu_seconds"])),
        keep_fds=(channel,),
        **layers,
    )


def _seed(seed: int) -> None:
    """The run's own random state: every fork of the template starts from the same one."""
    import random

    import numpy

    random.seed(seed)
    numpy.random.seed(seed & 0xFFFFFFFF)


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
        f"the code memory limit of {limit >> 20} MiB is too small: a sandbox process already uses "
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


def _collect_run_garbage() -> None:
    """Finalise everything a restricted run left behind (generators suspended in `try/finally`, reference cycles)
    before its answer is sent, so that a refusal inside a finaliser is still the run's own `code_policy`."""
    while gc.collect():
        pass


# What the template imports once, so that no run pays for it and a child's lazy imports find them in memory: the
# modules the reference's executor imports, and the stdlib and numpy modules that plan code commonly uses.
_PRELOADED = (
    "collections",
    "copy",
    "dataclasses",
    "enum",
    "functools",
    "heapq",
    "itertools",
    "json",
    "logging",
    "math",
    "operator",
    "random",
    "re",
    "statistics",
    "string",
    "types",
    "typing",
    "numpy",
    "numpy.linalg",
    "numpy.random",
    "edsb.geometry.scene_graph",
    "edsb.sandbox.code_api",
    "edsb.sandbox.exact",
)
_RESTRICTED = ("RestrictedPython", "edsb.sandbox.policy")  # for a template of the restricted sandbox


def _warm_imports(sandbox: str = "restricted") -> None:
    """Import everything a run may need now, before the limits, numpy's lazy imports included (its array printer
    is imported on first use: done here, printing an array in a run finds it loaded, whatever ran before); the
    restricted sandbox's policy (RestrictedPython) only for a template that runs it."""
    import importlib

    for name in (*_PRELOADED, *(_RESTRICTED if sandbox == "restricted" else ())):
        importlib.import_module(name)
    numpy = sys.modules["numpy"]
    str(numpy.array([0.5, 1])), repr(numpy.array([[1, 2]])), str(numpy.float64(0.5)), format(numpy.int64(1), "d")


def _run_restricted(request: dict[str, Any], api_scene: ApiScene) -> dict[str, Any] | str:
    """One run under RestrictedPython: the policy's compile, guards and blame, as the restricted sandbox had them."""
    from edsb.sandbox.policy import Guards

    program = _program(request["reply"])
    guards = Guards(int(request["max_printed_chars"]))
    api = CodeApi(api_scene, dict(request["latest_plans"]))
    try:
        if isinstance(program, Exception):
            raise program  # compiling failed: reported like any failure of the run
        _run(program, api, guards)
        response = _pack(api._plan_entries(), guards.printed(), request)
    except CodeError as exc:
        response = _error(exc.kind, exc.message)
    except MemoryError:
        response = _error(ErrorKind.CODE_MEMORY, "MemoryError")
    except RecursionError as exc:
        response = _error(ErrorKind.CODE_RUNTIME, exception_text(exc))
    except EdsbFault as exc:
        response = _fault(str(exc))
    except Exception as exc:  # a failure of ours while packing the result
        response = _fault(f"the sandbox failed packing the plan: {fault_text(exc)}")
    del api, program
    try:
        _collect_run_garbage()
    except MemoryError:
        return _error(ErrorKind.CODE_MEMORY, "MemoryError")
    if guards.violation is not None and (isinstance(response, str) or response["status"] == "error"):
        # A refusal the run's own check came too early for: in a finaliser, or in model code that rendering the
        # exception or packing the plan ran (`repr` of a `Counter` calls its `most_common`, which the code may set).
        return _error(ErrorKind.CODE_POLICY, guards.violation)
    return response


class _Printed(io.TextIOBase):
    """`sys.stdout` and `sys.stderr` of an exact run: what the code prints, up to a bound (the rest is dropped)."""

    def __init__(self, limit: int) -> None:
        self.parts: list[str] = []
        self.room = limit

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.room > 0:
            kept = str(text)[: self.room]
            self.parts.append(kept)
            self.room -= len(kept)
        return len(text)


def _run_exact(request: dict[str, Any], api_scene: ApiScene) -> dict[str, Any] | str:
    """One run under CPython's own `exec` (`exact.run_exact`). Every failure is the model's: `run_exact` reports
    the reference's errors, and packing may run the code's own objects (`__hash__`, `__repr__` of what it set)."""
    printed = _Printed(int(request["max_printed_chars"]))
    sys.stdout = sys.stderr = printed
    try:
        entries = exact.run_exact(request["reply"], api_scene, dict(request["latest_plans"]))
    except CodeError as exc:
        return _error(exc.kind, exc.message)
    except MemoryError:
        return _error(ErrorKind.CODE_MEMORY, "MemoryError")
    except BaseException as exc:  # run_exact reports the model's errors itself: whatever escapes is still theirs
        return _error(ErrorKind.CODE_RUNTIME, exception_text(exc))
    try:
        return _pack(entries, "".join(printed.parts), request)
    except CodeError as exc:  # `to_plain`'s own verdict on a value that cannot be converted (code_output)
        return _error(exc.kind, exc.message)
    except MemoryError:
        return _error(ErrorKind.CODE_MEMORY, "MemoryError")
    except BaseException as exc:
        return _error(ErrorKind.CODE_OUTPUT, f"the plan cannot be read: {exception_text(exc)}")


def _pack(entries: list[PlanEntry], printed: str, request: dict[str, Any]) -> dict[str, Any] | str:
    """What the code set as the answer's JSON text (the plan encoded once), or the model's `code_output` error when
    it is too large."""
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
        for entry in entries
    ]
    output = replace_surrogates(printed)
    repaired = repaired or output is not printed
    plan = json.dumps(characters, allow_nan=True)
    if len(plan) > int(request["max_plan_bytes"]):
        return _error(ErrorKind.CODE_OUTPUT, f"the plan is too large ({len(plan)} bytes)")
    flag = ', "repaired": true' if repaired else ""
    response = f'{{"status": "ok", "plan": {plan}, "output": {json.dumps(output)}{flag}}}'
    if len(response) > int(request["max_result_bytes"]):
        return _error(ErrorKind.CODE_OUTPUT, f"the plan and printed text are too large ({len(response)} bytes)")
    return response


_MAX_MESSAGE_CHARS = 2000


def _bounded(message: str) -> tuple[str, bool]:
    """A message as the child sends it: at most `_MAX_MESSAGE_CHARS` characters, valid Unicode (and whether it
    had to be repaired)."""
    if len(message) > _MAX_MESSAGE_CHARS:
        message = message[:_MAX_MESSAGE_CHARS] + "…"
    cleaned = replace_surrogates(message)
    return cleaned, cleaned is not message


_NO_THREAD = "can't start new thread"


def _error(kind: str, message: str) -> dict[str, Any]:
    if _NO_THREAD in message:  # the kernel's cap on tasks (RLIMIT_NPROC), met by the model's own threads
        message = f"{message} (a run may have at most {kernel.TASK_LIMIT} threads, its own included, in its memory)"
    message, repaired = _bounded(message)
    answer = {"status": "error", "kind": str(kind), "message": message}
    return {**answer, "repaired": True} if repaired else answer


def _fault(message: str) -> dict[str, Any]:
    """A fault of edsb, not of the model (restricted only): the parent raises EdsbFault."""
    return {"status": "fault", "message": _bounded(message)[0]}


def _api_scene(spec: tuple[Any, ...], cache: dict[tuple[str, ...], Any]) -> Any:
    """A scene by its spec: the template's copy of a benchmark scene (unpickled there once, from the parent's
    pickle: the template never opens the data), or unpickled from the request (an inline scene)."""
    key = scene_key(spec)
    if key not in cache:
        scene = pickle.loads(spec[2])
        cache[key] = scene if isinstance(scene, ApiScene) else ApiScene(scene)
        _freeze_long_lived_objects()
    return cache[key]


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
    from RestrictedPython import compile_restricted_exec

    from edsb.sandbox.policy import PlanCodePolicy

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
    from edsb.sandbox.policy import MODEL_OPERATIONS

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
    from edsb.sandbox.policy import PolicyViolation

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
