"""The child's side of the sandbox: a template process that forks one fresh child per run, and the child that
loads its scene, contains itself, runs the model's code once and answers with what it set. Everything here runs in
those processes only.

The template starts with a minimal environment, imports what runs need (`_PRELOADED`), refuses to start when the
memory limit leaves no room to run code (so a too-small `--code-memory` is one clear error), builds the kernel's
filters once (`kernel.prepare`), keeps the scenes the pool sends, asks to be scheduled as batch work (Linux
`SCHED_BATCH`) and then only forks. A child applies `kernel.contain` at once (descriptors, rlimits, an unprivileged
user, and Landlock and seccomp: all of them for `exact`, those the host has for `restricted`), waits for its one
request (its scene is the template's copy or comes with the request), seeds `random` and `numpy.random` from the
run's seed, runs the code and exits: nothing a run changes (a patched module, a cache, a thread, the random state)
outlives it.

`exact` runs the code with CPython's own `exec`, as the reference does (`exact`); every failure is the model's.
`restricted` runs it under RestrictedPython, through `restricted.run_restricted` (a template of the exact sandbox
never imports that package).
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import math
import os
import pickle
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from edsb.results import ErrorKind
from edsb.sandbox import exact, kernel
from edsb.sandbox.child_answer import error, pack, watch_thread_starts
from edsb.sandbox.code_api import ApiScene
from edsb.sandbox.errors import CodeError, exception_text
from edsb.sandbox.seeds import seed_randomness
from edsb.sandbox.wire import (
    HEADER,
    frame,
    read_blocking,
    scene_key,
)


def template_main() -> None:
    """The template process, started by the pool (`pool._Template.start`): prepare once, then fork a child for each
    request on stdin (a Unix socket that also carries the child's socket) until stdin closes. It never runs model
    code; each child serves one run and exits. It dies with the pool's thread that started it, and its children with
    it; once stdin closes it kills and reaps the children still running."""
    # 1. Death with the parent; the control socket, and standard streams that cannot corrupt it; 2. the preparation
    # shared by every child.
    kernel.die_with_parent(int(sys.argv[5]))
    control = _control_socket()
    if not _prepare(control):
        return
    control.sendall(frame({"status": "ready"}))
    # 3. Each command: reap the children the parent is done with, load the scenes asked for, fork the children.
    scenes: dict[tuple[str, ...], Any] = {}
    unloadable: dict[tuple[str, ...], str] = {}
    while (received := _next_command(control)) is not None:
        command, fds = received
        for pid in command.get("done", ()):  # children the parent killed after their answer: reap them
            _reap(int(pid))
        if command["op"] == "reap":
            control.sendall(frame({"status": _reap(int(command["pid"]))}))
            continue
        _load_scenes(command["scenes"], scenes, unloadable)
        pids, failure = _fork_children(control, fds, scenes, command["settings"])
        held = [key for key in scenes if key[0] == "held"]
        spawned = {"status": "spawned", "pids": pids, "scenes": held, "unloadable": list(unloadable.items())}
        control.sendall(frame({**spawned, "message": failure} if failure else spawned))
    _end_children()


def _control_socket() -> socket.socket:
    """The control socket comes as stdin: moved off descriptor 0, which becomes /dev/null like 1 and 2 (stray
    writes, warnings and C libraries cannot corrupt the protocol, and every child's standard streams are plain
    files)."""
    control = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    return control


def _prepare(control: socket.socket) -> bool:
    """Imports, the kernel's layers (built once here, applied in every child) and the template's own limits; a
    failure is told to the parent as fatal, and the template ends."""
    import resource

    try:
        _warm_imports(sys.argv[4])
        memory = int(sys.argv[2])
        in_use = _address_space_in_use()
        if in_use is not None and memory < in_use + _MIN_HEADROOM_BYTES:
            control.sendall(frame({"status": "fatal", "message": _too_little_memory(memory, in_use)}))
            return False
        if sys.platform.startswith("linux"):
            kernel.prepare(protected=json.loads(sys.argv[3]), view=True)
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write fails with an OSError instead of killing us
        os.environ.clear()
        _yield_to_the_runner()
        _freeze_long_lived_objects()
    except Exception as exc:
        control.sendall(frame({"status": "fatal", "message": exception_text(exc)}))
        return False
    return True


def _next_command(control: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """The parent's next command and the descriptors that came with it; None once the parent has closed."""
    header, fds, _, _ = socket.recv_fds(control, HEADER.size, _MAX_BATCH)
    if len(header) < HEADER.size:
        rest = read_blocking(control.fileno(), HEADER.size - len(header))
        if not header or rest is None:
            return None
        header += rest
    body = read_blocking(control.fileno(), HEADER.unpack(header)[0])
    if body is None:
        return None
    return pickle.loads(body), list(fds)


def _load_scenes(specs: list[Any], scenes: dict[tuple[str, ...], Any], unloadable: dict[tuple[str, ...], str]) -> None:
    """The benchmark scenes runs asked for: unpickled once, so every fork has them."""
    for spec in specs:
        key = scene_key(spec)
        if key not in unloadable and key not in scenes:
            try:
                _api_scene(spec, scenes)
            except Exception as exc:
                unloadable[key] = f"cannot load the scene in the sandbox: {exception_text(exc)}"


def _fork_children(
    control: socket.socket, fds: list[int], scenes: dict[tuple[str, ...], Any], settings: dict[str, Any]
) -> tuple[list[int | None], str]:
    """One child per channel; once the kernel refuses a fork, the rest of the batch gets none, and the parent is
    told why."""
    pids: list[int | None] = []
    failure = ""
    parent = os.getpid()
    for channel in fds:
        pid, failure = _fork() if not failure else (None, failure)
        if pid is None:
            os.close(channel)
            pids.append(None)
            continue
        if pid == 0:  # the child: one run, then exit
            try:
                kernel.die_with_parent(parent)
                control.close()
                for other in fds:
                    if other != channel:
                        with contextlib.suppress(OSError):
                            os.close(other)
                _serve_one(channel, scenes, settings)
            finally:
                os._exit(0)
        os.close(channel)
        pids.append(pid)
        _cpu_limits[pid] = math.ceil(float(settings["cpu_seconds"])) + kernel.CPU_GRACE_SECONDS
    return pids, failure


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


def _end_children() -> None:
    """Kill and reap every child still running (the parent has closed: nobody waits for their answers)."""
    for pid in list(_cpu_limits):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        _reap(pid)


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
        send(error(ErrorKind.CODE_MEMORY, "MemoryError: out of memory while unpacking the scene"))
        return
    except Exception as exc:  # edsb's, not the model's: its class cannot be imported here, say (never silent)
        send({"status": "fatal", "message": f"cannot load the scene in the sandbox: {exception_text(exc)}"})
        return
    if request["scene"][0] != "held":  # still edsb's frame (no model code has run): the parent trusts it
        send({"status": "loaded"})
    seed_randomness(int(request["seed"]))
    watch_thread_starts()
    if exact:
        send(_run_exact(request, api_scene))
    else:
        from edsb.sandbox.restricted import run_restricted  # loaded by the template, never read from disk here

        send(run_restricted(request, api_scene))


def _containment(request: dict[str, Any], channel: int, exact: bool) -> kernel.Containment:
    """Every layer for the exact sandbox (`contain` fails when one is missing); for the restricted one, the layers
    the host supports (descriptors, limits and the privilege drop on any POSIX host)."""
    layers: dict[str, bool] = {}
    if not exact:
        support = kernel.host_support()
        abi = support.landlock_abi
        layers = {"landlock": abi is not None and abi >= kernel.MIN_LANDLOCK_ABI, "seccomp": support.seccomp}
    return kernel.Containment(
        parent=os.getppid(),
        memory_bytes=int(request["memory_bytes"]),
        cpu_seconds=math.ceil(float(request["cpu_seconds"])),
        keep_fds=(channel,),
        **layers,
    )


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


def _warm_imports(sandbox: str = "restricted") -> None:
    """Import everything a run may need now, before the limits, numpy's lazy imports included (its array printer
    is imported on first use: done here, printing an array in a run finds it loaded, whatever ran before); the
    restricted sandbox's policy (RestrictedPython) only for a template that runs it."""
    import importlib

    from edsb.sandbox import restricted

    for name in (*_PRELOADED, *(restricted.PRELOADED if sandbox == "restricted" else ())):
        importlib.import_module(name)
    numpy = sys.modules["numpy"]
    str(numpy.array([0.5, 1])), repr(numpy.array([[1, 2]])), str(numpy.float64(0.5)), format(numpy.int64(1), "d")


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
        return error(exc.kind, exc.message)
    except MemoryError:
        return error(ErrorKind.CODE_MEMORY, "MemoryError")
    except BaseException as exc:  # run_exact reports the model's errors itself: whatever escapes is still theirs
        return error(ErrorKind.CODE_RUNTIME, exception_text(exc))
    try:
        return pack(entries, "".join(printed.parts), request)
    except CodeError as exc:  # `to_plain`'s own verdict on a value that cannot be converted (code_output)
        return error(exc.kind, exc.message)
    except MemoryError:
        return error(ErrorKind.CODE_MEMORY, "MemoryError")
    except BaseException as exc:
        return error(ErrorKind.CODE_OUTPUT, f"the plan cannot be read: {exception_text(exc)}")


def _api_scene(spec: tuple[Any, ...], cache: dict[tuple[str, ...], Any]) -> Any:
    """A scene by its spec: the template's copy of a benchmark scene (unpickled there once, from the parent's
    pickle: the template never opens the data), or unpickled from the request (an inline scene)."""
    key = scene_key(spec)
    if key not in cache:
        scene = pickle.loads(spec[2])
        cache[key] = scene if isinstance(scene, ApiScene) else ApiScene(scene)
        _freeze_long_lived_objects()
    return cache[key]
