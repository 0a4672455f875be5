"""The parent's side of the sandbox: a pool of worker processes per `SandboxLimits`, and the calls that hand a reply
to a worker and wait for its answer.

Each worker starts with a minimal environment (none of the parent's variables, so no API keys), in `/`, in its own
session, with stderr discarded; the parent kills it when a run exceeds its wall-clock timeout, and replaces it after
a timeout, a memory error, a crash or `runs_per_worker` runs. The public functions are thread-safe, so an asyncio
runner can call them from a thread pool.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from edsb.geometry.scene import Scene
from edsb.results import ErrorKind
from edsb.sandbox.code_api import ApiScene
from edsb.sandbox.errors import CodeError, EdsbFault, SandboxError
from edsb.sandbox.limits import DEFAULT_LIMITS, CodeContext, SandboxLimits, SceneSource
from edsb.sandbox.wire import HEADER, Deadline, RawPlan, WorkerDied, decode_raw_plan, read_answer

# --- public entry points ----------------------------------------------------------------------------------------------


def execute_plan_code(reply: str, context: CodeContext, limits: SandboxLimits | None = None) -> RawPlan:
    """Run the code of a model reply (or bare code) in a sandbox worker: what it set, or CodeError for the model's
    failures (EdsbFault / SandboxError when edsb itself fails)."""
    return default_pool(limits or DEFAULT_LIMITS).execute(reply, context)


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
        """What the reply's code set; CodeError for the model's failures, EdsbFault / SandboxError for edsb's."""
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
    "from edsb.sandbox.worker import worker_main; worker_main()"
)


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
        except (WorkerDied, Deadline):
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
        except WorkerDied:
            self.stop()
            raise _StaleWorker() from None
        try:
            response = self._receive(time.monotonic() + _LOAD_TIMEOUT, limits.max_result_bytes)
            if response.get("status") == "loaded":
                response = self._receive(time.monotonic() + limits.timeout, limits.max_result_bytes)
        except Deadline:
            self.stop()
            raise CodeError(
                ErrorKind.CODE_TIMEOUT, f"TimeoutError: the code ran longer than {limits.timeout:g} s"
            ) from None
        except WorkerDied as died:
            self.stop()
            raise self._death_error(str(died)) from None
        if response.get("recycle"):
            self.stop()
        status = response.get("status")
        try:
            if status == "ok":
                return decode_raw_plan(response["plan"], response.get("output", ""))
            if status == "error":
                raise CodeError(response["kind"], str(response["message"]))
            if status == "fault":
                raise EdsbFault(str(response["message"]))
        except (KeyError, TypeError, ValueError, RecursionError, SandboxError) as exc:
            self.stop()
            raise CodeError(ErrorKind.CODE_CRASH, f"the sandbox worker sent a malformed answer ({exc!r})") from None
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
            return CodeError(ErrorKind.CODE_TIMEOUT, "TimeoutError: the code used up its CPU time")
        if code is not None and code < 0 and -code == signal.SIGKILL:
            return CodeError(ErrorKind.CODE_MEMORY, "MemoryError: the worker was killed (out of memory?)")
        return CodeError(ErrorKind.CODE_CRASH, f"the sandbox worker died ({detail}, exit status {code})")

    def _send(self, payload: bytes) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(HEADER.pack(len(payload)) + payload)
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise WorkerDied("it stopped reading") from None

    def _receive(self, deadline: float, max_result_bytes: int) -> dict[str, Any]:
        assert self.process.stdout is not None
        return read_answer(self.process.stdout.fileno(), deadline, max_result_bytes)
