"""Running model-written plan code safely: RestrictedPython in a separate, resource-limited worker process.

The reference `exec`s model code unsandboxed, with no time limit (§9.9). Here each run goes to a worker process that

* was started with a minimal environment (no API keys: the parent's variables never reach it) and scrubs
  `os.environ` once more before running model code;
* limits its address space (`RLIMIT_AS`), CPU time per run (`RLIMIT_CPU`, a backstop) and file writes
  (`RLIMIT_FSIZE` = 0), and is killed by the parent when a run exceeds its wall-clock timeout;
* compiles the prepared code with RestrictedPython plus our policy (no imports, no classes, not even through the
  real `type`, no names or attributes starting with `_`, no `str.format`, no attribute writes except on `Area`) and
  executes it with a fresh namespace holding only the API, `Area` and a short list of harmless builtins;
* bounds what it sends back (the plan, because the parent samples positions from it without a time limit, and the
  printed text);
* answers with JSON (never pickle) of bounded size.

Workers are recycled: a run cannot change anything the next run sees (the namespace, the API object and the builtins
are rebuilt per run; scene data is reachable only through underscore attributes; whatever the code leaves behind is
garbage-collected, finalisers included, before its answer is sent, so none of its code runs during a later run), and
a worker is replaced after a timeout, a memory error, a crash or a fixed number of runs. A worker refuses to start
when the memory limit leaves it no room to run code, so a too-small `--code-memory` is a clear error rather than
every run crashing. The public functions are thread-safe, so an asyncio runner can call them from a thread pool.

Verdicts follow the reference where its `exec` fails: syntax errors, a missing or uncallable `parse_event`, and
exceptions raised by the code keep their class name and message (`KeyError: 'chair_99'`). Where the reference would
have succeeded only by escaping a sandbox (imports, dunder access), we report `code_policy` instead; a policy
violation stays the verdict even if the code catches the exception.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import gc
import hashlib
import inspect
import itertools
import json
import math
import operator
import os
import pickle
import re
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from RestrictedPython import RestrictingNodeTransformer, compile_restricted_exec
from RestrictedPython.Guards import guarded_iter_unpack_sequence, guarded_unpack_sequence
from RestrictedPython.transformer import INSPECT_ATTRIBUTES, IOPERATOR_TO_STR, copy_locations

from edsb.errors import EdsbError
from edsb.geometry.scene import Scene
from edsb.planning.code import (
    ENTRY_NAME,
    CodeError,
    CodeErrorKind,
    Opaque,
    Plain,
    Plan,
    RawCharacterPlan,
    RawPlan,
    exception_text,
    extract_code,
    plan_from_raw,
    prepare_code,
)
from edsb.planning.code_api import ApiScene, Area, CodeApi
from edsb.planning.scenario import LatestPlan
from edsb.planning.variants import PlanningMode

# --- configuration and inputs -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SandboxLimits:
    """Per-run limits. One pool of workers exists per distinct value (the memory limit is set at worker start)."""

    timeout: float = 10.0  # wall-clock seconds for compiling and running the code
    memory_bytes: int = 1 << 30  # address space of the worker process
    cpu_seconds: float | None = None  # CPU seconds per run (backstop for a stalled parent); None = timeout + 5
    max_result_bytes: int = 1 << 20  # JSON size of what the code set, printed text included
    # JSON size of the plan alone. Honest plans take a few hundred bytes; the parent samples positions for every
    # character and relationship without a time limit, so this bounds the parent's work per run (about 2 s).
    max_plan_bytes: int = 16 << 10
    max_printed_chars: int = 1 << 16  # printed text kept (the rest is dropped)
    runs_per_worker: int = 500  # a worker is replaced after this many runs
    workers: int = 0  # processes per pool; 0 = min(4, CPU count)

    @property
    def cpu_budget(self) -> float:
        return self.cpu_seconds if self.cpu_seconds is not None else self.timeout + 5.0


DEFAULT_LIMITS = SandboxLimits()


@dataclass(frozen=True)
class SceneSource:
    """A benchmark scene by data directory and name; workers load and cache it themselves."""

    data_dir: str
    scene_name: str


@dataclass(frozen=True)
class CodeContext:
    """What a run's API needs, in picklable form: the scene (by source; or a `Scene`, or an `ApiScene` with its own
    graph, e.g. built by a test) and each character's latest history plan (`Scenario.latest_plans`, used by
    `is_object_occupied`)."""

    scene: SceneSource | Scene | ApiScene
    latest_plans: tuple[tuple[str, LatestPlan], ...] = field(default=())

    @classmethod
    def create(
        cls, scene: SceneSource | Scene | ApiScene, latest_plans: Mapping[str, LatestPlan] | None = None
    ) -> CodeContext:
        return cls(scene, tuple((latest_plans or {}).items()))

    @classmethod
    def for_benchmark(
        cls, data_dir: str | Path, scene_name: str, latest_plans: Mapping[str, LatestPlan] | None = None
    ) -> CodeContext:
        return cls.create(SceneSource(str(Path(data_dir).resolve()), scene_name), latest_plans)


class SandboxError(EdsbError):
    """The sandbox itself cannot work (a worker does not start or a scene cannot be loaded): not the model's fault."""


# --- public entry points ----------------------------------------------------------------------------------------------


def execute_plan_code(reply: str, context: CodeContext, limits: SandboxLimits | None = None) -> RawPlan:
    """Run the code of a model reply (or bare code) in a sandbox worker; raise CodeError for any failure."""
    return default_pool(limits or DEFAULT_LIMITS).execute(reply, context)


def run_plan_code(reply: str, context: CodeContext, mode: PlanningMode, limits: SandboxLimits | None = None) -> Plan:
    """`execute_plan_code`, then the reference's conversion for the planning mode (§4.5)."""
    return plan_from_raw(execute_plan_code(reply, context, limits), mode)


def check_sandbox(limits: SandboxLimits | None = None) -> None:
    """Start a worker with these limits now (it stays in the pool for the runs): a setting that cannot work, such as
    a memory limit below what a worker needs, is then one SandboxError before any run instead of a failure of each."""
    default_pool(limits or DEFAULT_LIMITS).warm_up()


_pools: dict[SandboxLimits, SandboxPool] = {}
_pools_lock = threading.Lock()


def default_pool(limits: SandboxLimits) -> SandboxPool:
    """The process-wide pool for these limits, created on first use and closed at interpreter exit."""
    with _pools_lock:
        pool = _pools.get(limits)
        if pool is None:
            pool = _pools[limits] = SandboxPool(limits)
        return pool


def shutdown_sandboxes() -> None:
    """Stop every worker of every default pool (also registered to run at exit)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()


atexit.register(shutdown_sandboxes)


class SandboxPool:
    """A bounded set of worker processes for one `SandboxLimits`; `execute` may be called from many threads."""

    def __init__(self, limits: SandboxLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        size = limits.workers or min(4, os.cpu_count() or 1)
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        # Inline scenes, pickled once: id(scene) -> (scene, digest, pickle).
        self._blobs: dict[int, tuple[Scene | ApiScene, str, bytes]] = {}

    def execute(self, reply: str, context: CodeContext) -> RawPlan:
        request = self._request(reply, context)
        with self._slots:
            for _ in range(3):
                worker = self._checkout()
                try:
                    return worker.run(request, self.limits)
                except _StaleWorker:
                    continue  # it died while idle: the request never reached it
                finally:
                    self._checkin(worker)
        raise SandboxError("sandbox workers keep dying before they accept work")

    def warm_up(self) -> None:
        """Have at least one idle worker; raises SandboxError if none can start."""
        self._checkin(self._checkout())

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.stop()

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, reply: str, context: CodeContext) -> bytes:
        scene: tuple[str, ...] | tuple[str, str, bytes]
        if isinstance(context.scene, SceneSource):
            scene = ("source", context.scene.data_dir, context.scene.scene_name)
        else:
            scene = ("inline", *self._scene_blob(context.scene))
        request = {
            "reply": reply,
            "scene": scene,
            "latest_plans": context.latest_plans,
            "cpu_seconds": self.limits.cpu_budget,
            "max_printed_chars": self.limits.max_printed_chars,
            "max_result_bytes": self.limits.max_result_bytes,
            "max_plan_bytes": self.limits.max_plan_bytes,
        }
        return pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)

    def _scene_blob(self, scene: Scene | ApiScene) -> tuple[str, bytes]:
        with self._lock:
            cached = self._blobs.get(id(scene))
            if cached is None or cached[0] is not scene:
                blob = pickle.dumps(scene, protocol=pickle.HIGHEST_PROTOCOL)
                cached = self._blobs[id(scene)] = (scene, hashlib.sha256(blob).hexdigest(), blob)
            return cached[1], cached[2]

    def _checkout(self) -> _Worker:
        with self._lock:
            if self._closed:
                raise SandboxError("the sandbox pool is closed")
            while self._idle:
                worker = self._idle.pop()
                if worker.alive and worker.process.poll() is None:
                    return worker
                worker.stop()
        return _Worker.start(self.limits)

    def _checkin(self, worker: _Worker) -> None:
        if not worker.alive or worker.runs >= self.limits.runs_per_worker:
            worker.stop()
            return
        with self._lock:
            if not self._closed:
                self._idle.append(worker)
                return
        worker.stop()


# --- the parent's side of a worker ------------------------------------------------------------------------------------

_HEADER = struct.Struct(">I")
_STARTUP_TIMEOUT = 120.0  # seconds for a worker to import its modules
_LOAD_TIMEOUT = 120.0  # seconds for a worker to load and prepare a scene (once per scene and worker)
_WORKER_ENV = {
    "PYTHONHASHSEED": "0",  # set iteration in model code is reproducible from run to run
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONIOENCODING": "utf-8",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "LC_ALL": "C.UTF-8",
}
_BOOTSTRAP = (
    "import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
    "from edsb.planning.sandbox import _worker_main; _worker_main()"
)


class _WorkerDied(Exception):
    pass


class _Deadline(Exception):
    pass


class _StaleWorker(Exception):
    pass


class _Worker:
    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.runs = 0
        self.alive = True

    @classmethod
    def start(cls, limits: SandboxLimits) -> _Worker:
        paths = [os.path.abspath(p) for p in sys.path if p]  # the worker runs in /
        try:
            process = subprocess.Popen(
                [sys.executable, "-s", "-P", "-c", _BOOTSTRAP, json.dumps(paths), str(limits.memory_bytes)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=_WORKER_ENV,
                cwd="/",
                start_new_session=True,
            )
        except OSError as exc:
            raise SandboxError(f"cannot start a sandbox worker: {exc}") from None
        worker = cls(process)
        try:
            ready = worker._receive(time.monotonic() + _STARTUP_TIMEOUT, limits.max_result_bytes)
        except (_WorkerDied, _Deadline):
            worker.stop()
            raise SandboxError("a sandbox worker failed to start (is edsb importable by the same Python?)") from None
        if ready.get("status") != "ready":
            worker.stop()
            raise SandboxError(f"a sandbox worker failed to start: {ready.get('message', ready)}")
        return worker

    def run(self, request: bytes, limits: SandboxLimits) -> RawPlan:
        self.runs += 1
        try:
            self._send(request)
        except _WorkerDied:
            self.stop()
            raise _StaleWorker() from None
        try:
            response = self._receive(time.monotonic() + _LOAD_TIMEOUT, limits.max_result_bytes)
            if response.get("status") == "loaded":
                response = self._receive(time.monotonic() + limits.timeout, limits.max_result_bytes)
        except _Deadline:
            self.stop()
            raise CodeError(
                CodeErrorKind.TIMEOUT, f"TimeoutError: the code ran longer than {limits.timeout:g} s"
            ) from None
        except _WorkerDied as died:
            self.stop()
            raise self._death_error(str(died)) from None
        if response.get("recycle"):
            self.stop()
        status = response.get("status")
        try:
            if status == "ok":
                return _decode_raw_plan(response["plan"], response.get("output", ""))
            if status == "error":
                raise CodeError(response["kind"], str(response["message"]))
        except (KeyError, TypeError, ValueError, RecursionError, SandboxError) as exc:
            self.stop()
            raise CodeError(CodeErrorKind.CRASH, f"the sandbox worker sent a malformed answer ({exc!r})") from None
        raise SandboxError(str(response.get("message", "the sandbox worker failed")))

    def stop(self) -> None:
        if not self.alive:
            return
        self.alive = False
        with contextlib.suppress(OSError):
            self.process.kill()
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)

    def _death_error(self, detail: str) -> CodeError:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        code = self.process.returncode
        if code is not None and code < 0 and -code == signal.SIGXCPU:
            return CodeError(CodeErrorKind.TIMEOUT, "TimeoutError: the code used up its CPU time")
        if code is not None and code < 0 and -code == signal.SIGKILL:
            return CodeError(CodeErrorKind.MEMORY, "MemoryError: the worker was killed (out of memory?)")
        return CodeError(CodeErrorKind.CRASH, f"the sandbox worker died ({detail}, exit status {code})")

    def _send(self, payload: bytes) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(_HEADER.pack(len(payload)) + payload)
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise _WorkerDied("it stopped reading") from None

    def _receive(self, deadline: float, max_result_bytes: int) -> dict[str, Any]:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        (size,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size, deadline))
        if size > max_result_bytes + (1 << 16):
            raise _WorkerDied(f"it sent an oversized answer ({size} bytes)")
        payload = _read_exactly(fd, size, deadline)
        try:
            message = json.loads(payload.decode("utf-8"))
        except (ValueError, RecursionError):
            raise _WorkerDied("it sent an answer that is not JSON") from None
        if not isinstance(message, dict):
            raise _WorkerDied("it sent an answer that is not a JSON object")
        return message


def _read_exactly(fd: int, size: int, deadline: float) -> bytes:
    poller = select.poll()  # not select(): the harness may hold more than FD_SETSIZE descriptors
    poller.register(fd, select.POLLIN)
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        wait = deadline - time.monotonic()
        if wait <= 0 or not poller.poll(math.ceil(wait * 1000)):
            raise _Deadline()
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise _WorkerDied("end of output")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


# --- JSON form of a raw plan (worker → parent) ------------------------------------------------------------------------


def _encode_plain(value: Plain) -> Any:
    if isinstance(value, Opaque):
        return {"opaque": [value.type_name, value.text, value.hashable]}
    if isinstance(value, tuple):
        return {"tuple": [_encode_plain(v) for v in value]}
    if isinstance(value, list):
        return [_encode_plain(v) for v in value]
    return value


def _decode_plain(value: Any) -> Plain:
    if isinstance(value, dict):
        if "opaque" in value:
            type_name, text, hashable = value["opaque"]
            return Opaque(str(type_name), str(text), bool(hashable))
        return tuple(_decode_plain(v) for v in value["tuple"])
    if isinstance(value, list):
        return [_decode_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise SandboxError(f"malformed value from the sandbox worker: {type(value).__name__}")


def _decode_raw_plan(characters: list[dict[str, Any]], output: str) -> RawPlan:
    return RawPlan(
        tuple(
            RawCharacterPlan(
                character=_decode_plain(c["character"]),
                position=_decode_plain(c["position"]),
                target_action=_decode_plain(c["target_action"]),
                orientation=None if c["orientation"] is None else tuple(str(o) for o in c["orientation"]),
            )
            for c in characters
        ),
        str(output),
    )


# --- the worker -------------------------------------------------------------------------------------------------------
# Everything below runs inside the worker process only.


def _worker_main() -> None:
    """Serve requests on stdin/stdout until stdin closes. Started by `_Worker.start`."""
    import resource

    protocol_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # stray writes (warnings, C libraries) cannot corrupt the protocol
    os.dup2(devnull, 2)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    stdin = os.fdopen(0, "rb", buffering=0)

    def send(message: dict[str, Any]) -> None:
        payload = json.dumps(message, allow_nan=True).encode("utf-8")
        data = _HEADER.pack(len(payload)) + payload
        view = memoryview(data)
        while view:
            view = view[os.write(protocol_out, view) :]

    try:
        _warm_imports()
        memory = int(sys.argv[2])
        in_use = _address_space_in_use()
        if in_use is not None and memory < in_use + _MIN_HEADROOM_BYTES:
            send({"status": "fatal", "message": _too_little_memory(memory, in_use)})
            return
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write fails with an OSError instead of killing us
        os.environ.clear()
        _freeze_long_lived_objects()
    except Exception as exc:
        send({"status": "fatal", "message": exception_text(exc)})
        return
    send({"status": "ready"})

    scenes: dict[tuple[str, ...], Any] = {}
    while True:
        header = _read_blocking(stdin, _HEADER.size)
        if header is None:
            return
        body = _read_blocking(stdin, _HEADER.unpack(header)[0])
        if body is None:
            return
        response = _serve(pickle.loads(body), scenes, send)
        send(response)
        if response.get("recycle"):
            return


def _read_blocking(stream: Any, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


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


def _freeze_long_lived_objects() -> None:
    """Move modules and cached scenes out of the collector's sight: the per-run collection then only scans what the
    run itself created, and stays cheap."""
    gc.collect()
    gc.freeze()


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
    import edsb.planning.code_api  # noqa: F401


def _serve(
    request: dict[str, Any], scenes: dict[tuple[str, ...], Any], send: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    import resource

    try:
        api_scene = _api_scene(request["scene"], scenes)
    except MemoryError:
        return {"status": "fatal", "message": "out of memory while loading the scene", "recycle": True}
    except Exception as exc:
        return {"status": "fatal", "message": f"cannot load the scene: {exception_text(exc)}"}
    send({"status": "loaded"})

    used = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
    budget = math.ceil(used + float(request["cpu_seconds"]))
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (budget, hard))
    os.environ.clear()
    guards = _Guards(int(request["max_printed_chars"]))
    response = _execute(request, api_scene, guards)
    try:
        _collect_run_garbage()
    except MemoryError:
        return _error(CodeErrorKind.MEMORY, "MemoryError", recycle=True)
    if response["status"] == "ok" and guards.violation is not None:  # a finaliser tried something refused
        return _error(CodeErrorKind.POLICY, guards.violation)
    return response


def _execute(request: dict[str, Any], api_scene: ApiScene, guards: _Guards) -> dict[str, Any]:
    """Run one program and pack what it set; everything it created is unreachable once this returns."""
    api = CodeApi(api_scene, dict(request["latest_plans"]))
    try:
        _run(request["reply"], api, guards)
        characters = [
            {
                "character": _encode_plain(_plain(entry.character)),
                "position": _encode_plain(_plain(entry.position)),
                "target_action": _encode_plain(_plain(entry.target_action)),
                "orientation": None if entry.orientation is None else [str(o) for o in entry.orientation],
            }
            for entry in api._plan_entries()
        ]
        plan_size = len(json.dumps(characters, allow_nan=True))
        if plan_size > int(request["max_plan_bytes"]):
            return _error(CodeErrorKind.OUTPUT, f"the plan is too large ({plan_size} bytes)")
        response: dict[str, Any] = {"status": "ok", "plan": characters, "output": guards.printed()}
        size = len(json.dumps(response, allow_nan=True))
        if size > int(request["max_result_bytes"]):
            return _error(CodeErrorKind.OUTPUT, f"the plan and printed text are too large ({size} bytes)")
        return response
    except CodeError as exc:
        return _error(exc.kind, exc.message, recycle=exc.kind == CodeErrorKind.MEMORY)
    except MemoryError:
        return _error(CodeErrorKind.MEMORY, "MemoryError", recycle=True)
    except RecursionError as exc:
        return _error(CodeErrorKind.RUNTIME, exception_text(exc))
    except Exception as exc:  # a failure of ours while packing the result: never let it kill the loop silently
        return _error(CodeErrorKind.CRASH, f"the sandbox failed: {exception_text(exc)}", recycle=True)


_MAX_MESSAGE_CHARS = 2000


def _error(kind: str, message: str, *, recycle: bool = False) -> dict[str, Any]:
    if len(message) > _MAX_MESSAGE_CHARS:
        message = message[:_MAX_MESSAGE_CHARS] + "…"
    return {"status": "error", "kind": str(kind), "message": message, "recycle": recycle}


def _api_scene(spec: tuple[Any, ...], cache: dict[tuple[str, ...], Any]) -> Any:
    from edsb.data.benchmark import Benchmark
    from edsb.geometry.scene import load_scene

    if spec[0] == "source":
        key = spec[:3]
        if key not in cache:
            cache[key] = ApiScene(load_scene(Benchmark.open(spec[1]), spec[2]))
            _freeze_long_lived_objects()
        return cache[key]
    key = ("inline", spec[1])
    if key not in cache:
        scene = pickle.loads(spec[2])
        cache[key] = scene if isinstance(scene, ApiScene) else ApiScene(scene)
        _freeze_long_lived_objects()
    return cache[key]


# --- compiling and running one program --------------------------------------------------------------------------------


def _run(reply: str, api: CodeApi, guards: _Guards) -> None:
    """Compile the prepared code, run its top level, then call `parse_event(self)` as the reference does."""
    source = prepare_code(extract_code(reply))
    try:
        tree = ast.parse(source, "<string>")
        compile(tree, "<string>", "exec", dont_inherit=True)  # the compiler's own checks ('return' outside function)
    except (SyntaxError, ValueError) as exc:
        raise CodeError(CodeErrorKind.SYNTAX, exception_text(exc)) from None
    except RecursionError:
        raise CodeError(CodeErrorKind.SYNTAX, "RecursionError: the code is nested too deeply to compile") from None
    compiled = compile_restricted_exec(tree, "<string>", policy=_PlanCodePolicy)
    if compiled.errors or compiled.code is None:
        errors = list(compiled.errors) or ["the code could not be compiled"]
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        raise CodeError(CodeErrorKind.POLICY, f"{errors[0]}{more}")

    namespace = guards.namespace()
    top_level: dict[str, Any] = {"self": api}
    try:
        exec(compiled.code, namespace, top_level)
        entry = _entry_point(top_level, namespace, api)
        entry(api)
    except _PolicyViolation:
        pass  # recorded by the guard, reported below
    except CodeError:
        raise
    except MemoryError:
        raise
    except RecursionError as exc:
        guards.raise_if_violated()
        raise CodeError(CodeErrorKind.RUNTIME, exception_text(exc)) from None
    except BaseException as exc:
        guards.raise_if_violated()
        raise CodeError(CodeErrorKind.RUNTIME, exception_text(exc)) from None
    guards.raise_if_violated()


def _entry_point(top_level: dict[str, Any], namespace: dict[str, Any], api: Any) -> Callable[..., Any]:
    """`parse_event` looked up as the reference's `exec` does (local names, then global), bound to `self`."""
    if ENTRY_NAME in top_level:
        entry = top_level[ENTRY_NAME]
    elif ENTRY_NAME in namespace:
        entry = namespace[ENTRY_NAME]
    else:
        raise CodeError(CodeErrorKind.NO_ENTRY, f"NameError: name '{ENTRY_NAME}' is not defined")
    if not callable(entry):
        raise CodeError(CodeErrorKind.NO_ENTRY, "TypeError: first argument must be callable")
    try:
        inspect.signature(entry).bind(api)
    except ValueError:
        pass  # a builtin without a signature: just call it
    except TypeError:
        # Other signatures are not rewritten (`def parse_event() -> None:`): the call fails while binding its
        # arguments, before any of the body runs, with Python's own message.
        try:
            entry(api)
        except TypeError as exc:
            raise CodeError(CodeErrorKind.NO_ENTRY, exception_text(exc)) from None
        return lambda _: None  # the signature check was wrong and the call ran: nothing left to do
    return entry


def _plain(value: Any, depth: int = 0) -> Plain:
    """What the code stored, as plain data the parent can rebuild (containers to a small depth)."""
    kind = type(value)
    if value is None or kind in (bool, float, str):
        return value
    if kind is int:
        return value if -(1 << 63) <= value < (1 << 63) else Opaque("int", "<a very large int>", True)
    if kind in (list, tuple) and depth < 4:
        items = [_plain(v, depth + 1) for v in value]
        return items if kind is list else tuple(items)
    try:
        hash(value)
        hashable = True
    except TypeError:
        hashable = False
    try:
        text = repr(value)
    except Exception:
        text = f"<{kind.__name__}>"
    return Opaque(kind.__name__, text[:200], hashable)


# --- the policy -------------------------------------------------------------------------------------------------------


class _PlanCodePolicy(RestrictingNodeTransformer):
    """RestrictedPython's rules, minus imports and classes, plus constructs common in model code that RestrictedPython
    refuses without a security reason: `d[k] += v`, annotated assignments and `nonlocal`."""

    def visit_Import(self, node: ast.Import) -> ast.AST:
        if all(alias.name in IMPORTABLE_MODULES for alias in node.names):
            return super().visit_Import(node)
        self.error(node, f"import statements are not allowed, except of {_IMPORTABLE_TEXT}")
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST:
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


class _PolicyViolation(Exception):
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


class _Guards:
    """Per-run guard functions and printed-text buffer; remembers the first policy violation."""

    def __init__(self, max_printed_chars: int) -> None:
        self.violation: str | None = None
        self._printed: list[str] = []
        self._printed_room = max_printed_chars

    def refuse(self, message: str) -> NoReturn:
        if self.violation is None:
            self.violation = message
        raise _PolicyViolation(message)

    def raise_if_violated(self) -> None:
        if self.violation is not None:
            raise CodeError(CodeErrorKind.POLICY, self.violation)

    def printed(self) -> str:
        return "".join(self._printed)

    def namespace(self) -> dict[str, Any]:
        import builtins

        allowed: dict[str, Any] = {name: getattr(builtins, name) for name in (*_SAFE_BUILTINS, *_SAFE_EXCEPTIONS)}
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

    def __init__(self, guards: _Guards) -> None:
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
