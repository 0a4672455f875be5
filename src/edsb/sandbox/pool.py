"""The parent's side of the sandbox: a pool of worker processes per `SandboxLimits`, and the calls that hand a reply
to a worker and wait for its answer.

A pool holds one template process and at most `workers` worker processes (by default one per core, whatever the
runner's concurrency: a call waits for a free worker). The template starts with a minimal environment (none of the
parent's variables, so no API keys), in `/`, in its own session, with stderr discarded; it imports everything, sets
the limits, and keeps the scenes the workers have used, but never runs model code. Workers are forked from it, so a
new or replaced worker costs a fork instead of an interpreter start and a scene load. The parent kills a worker when a
run exceeds its wall-clock timeout, and replaces it after a timeout, a memory error, a crash or `runs_per_worker`
runs. The public functions are thread-safe, so an asyncio runner can call them from a thread pool (`sandbox_threads`).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from edsb.geometry.scene import Scene
from edsb.results import ErrorKind
from edsb.sandbox.code_api import ApiScene
from edsb.sandbox.errors import CodeError, EdsbFault, SandboxError
from edsb.sandbox.limits import DEFAULT_LIMITS, CodeContext, SandboxLimits, SceneSource
from edsb.sandbox.wire import HEADER, Deadline, FrameReader, RawPlan, WorkerDied, decode_raw_plan, scene_key

# --- public entry points ----------------------------------------------------------------------------------------------


def execute_plan_code(reply: str, context: CodeContext, limits: SandboxLimits | None = None) -> RawPlan:
    """Run the code of a model reply (or bare code) in a sandbox worker: what it set, or CodeError for the model's
    failures (EdsbFault / SandboxError when edsb itself fails)."""
    return default_pool(limits or DEFAULT_LIMITS).execute(reply, context)


def sandbox_threads(limits: SandboxLimits | None = None) -> ThreadPoolExecutor:
    """Threads for an event loop's sandbox calls (`loop.run_in_executor`): as many as the pool has workers, so that
    no thread waits for a worker and no idle one competes for the GIL. At concurrency 256, asyncio's default pool
    (cores + 4 threads, four of them waiting on the workers) made the loop wait for the GIL at each hand-off."""
    return default_pool(limits or DEFAULT_LIMITS).threads


def check_sandbox(limits: SandboxLimits | None = None, scenes: Iterable[SceneSource] = ()) -> None:
    """Start the pool for these limits now, its workers included (they stay for the runs) and holding `scenes`
    (the benchmark scenes the runs will use, loaded once for all workers): a setting that cannot work, such as a
    memory limit below what a worker needs, is then one SandboxError before any run instead of a failure of each,
    and no run waits for a worker to start or a scene to load."""
    default_pool(limits or DEFAULT_LIMITS).warm_up(scenes)


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


def default_workers() -> int:
    """Workers per pool by default: one per core this process may use (at most 8). A run keeps a worker for a
    millisecond or so, so more workers than cores would only add processes, never throughput."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


class SandboxPool:
    """A bounded set of worker processes for one `SandboxLimits`, forked from one template process; `execute` may be
    called from many threads (a call waits while every worker is busy)."""

    def __init__(self, limits: SandboxLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self.size = limits.workers or default_workers()
        self._slots = threading.BoundedSemaphore(self.size)
        self.threads = ThreadPoolExecutor(self.size, thread_name_prefix="edsb-sandbox")
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        self._template: _Template | None = None
        self._template_lock = threading.Lock()
        # Benchmark scenes given at start or loaded by some worker: the template loads them too, so that later
        # workers have them.
        self._scenes: dict[tuple[str, ...], tuple[str, ...]] = {}
        # Inline scenes, pickled once: id(scene) -> (scene, digest, pickle).
        self._blobs: dict[int, tuple[Scene | ApiScene, str, bytes]] = {}

    def execute(self, reply: str, context: CodeContext) -> RawPlan:
        """What the reply's code set; CodeError for the model's failures, EdsbFault / SandboxError for edsb's."""
        request = self._request(reply, context)
        with self._slots:
            for _ in range(3):
                worker = self._checkout()
                try:
                    return worker.run(request, self.limits, self._scene_loaded)
                except _StaleWorker:
                    continue  # it died while idle: the request never reached it
                finally:
                    self._checkin(worker)
        raise SandboxError("sandbox workers keep dying before they accept work")

    def warm_up(self, scenes: Iterable[SceneSource] = ()) -> None:
        """Start the template and every worker now, the template holding `scenes` first so that every worker has
        them (a scene that cannot be loaded is reported by the runs that use it); raises SandboxError if the
        workers cannot start. Calls may run meanwhile (a runner warms its pool up while its first requests are out):
        one that finds no idle worker forks its own, and workers beyond the pool's size are stopped when idle."""
        with self._lock:
            for scene in scenes:
                spec = ("source", scene.data_dir, scene.scene_name, str(scene.perturb))
                self._scenes.setdefault(scene_key(spec), spec)
        workers: list[_Worker] = []
        try:
            for _ in range(self.size):
                workers.append(self._checkout())
        finally:
            for worker in workers:
                self._checkin(worker)

    def worker_pids(self) -> list[int]:
        """The process ids of the idle workers (for tests and benchmarks)."""
        with self._lock:
            return [worker.pid for worker in self._idle]

    def close_idle(self) -> None:
        """Stop the idle workers (the next call forks a fresh one); the template stays."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.stop()

    @property
    def template_pid(self) -> int | None:
        template = self._template
        return None if template is None else template.process.pid

    def close(self) -> None:
        self.threads.shutdown(wait=False)
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.stop()
        with self._template_lock:
            template, self._template = self._template, None
        if template is not None:
            template.stop()

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, reply: str, context: CodeContext) -> dict[str, Any]:
        scene: tuple[str, ...] | tuple[str, str, bytes]
        if isinstance(context.scene, SceneSource):
            scene = ("source", context.scene.data_dir, context.scene.scene_name, str(context.scene.perturb))
        else:
            scene = ("inline", *self._scene_blob(context.scene))
        return {
            "reply": reply,
            "scene": scene,
            "latest_plans": context.latest_plans,
            "cpu_seconds": self.limits.cpu_budget,
            "max_printed_chars": self.limits.max_printed_chars,
            "max_result_bytes": self.limits.max_result_bytes,
            "max_plan_bytes": self.limits.max_plan_bytes,
        }

    def _scene_loaded(self, spec: tuple[Any, ...]) -> None:
        if spec[0] == "source":
            with self._lock:
                self._scenes.setdefault(scene_key(spec), tuple(spec))

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
                if worker.idle_and_alive():
                    return worker
                worker.stop()
        return self._spawn()

    def _spawn(self) -> _Worker:
        """A new worker forked from the template (started, or restarted if it died, on first need)."""
        with self._lock:
            scenes = list(self._scenes.values())
        with self._template_lock:
            if self._closed:
                raise SandboxError("the sandbox pool is closed")
            for attempt in range(2):
                if self._template is None or not self._template.alive:
                    self._template = _Template.start(self.limits)
                try:
                    return self._template.spawn(scenes, self.limits)
                except _TemplateDied:
                    self._template.stop()
                    self._template = None
                    if attempt:
                        raise SandboxError("the sandbox template process keeps dying") from None
        raise AssertionError("unreachable")

    def _checkin(self, worker: _Worker) -> None:
        if not worker.alive or worker.runs >= self.limits.runs_per_worker:
            worker.stop()
            return
        with self._lock:
            if not self._closed and len(self._idle) < self.size:
                self._idle.append(worker)
                return
        worker.stop()


# --- the parent's side of the template and the workers ----------------------------------------------------------------

_STARTUP_TIMEOUT = 120.0  # seconds for the template to import its modules
_LOAD_TIMEOUT = 120.0  # seconds to load and prepare a scene (in a worker once per scene; in the template per spawn)
_REAP_TIMEOUT = 5.0  # seconds for a killed worker's exit status
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
    "from edsb.sandbox.worker import template_main; template_main()"
)
_CONTROL_ANSWER_BYTES = 1 << 16


class _StaleWorker(Exception):
    pass


class _TemplateDied(Exception):
    pass


class _Template:
    """The template process: forks workers on request and reports their exit status (they are its children)."""

    def __init__(self, process: subprocess.Popen[bytes], control: socket.socket) -> None:
        self.process = process
        self.control = control
        self.answers = FrameReader(control.fileno())
        self.alive = True
        self._lock = threading.Lock()  # one request and its answer at a time

    @classmethod
    def start(cls, limits: SandboxLimits) -> _Template:
        paths = [os.path.abspath(p) for p in sys.path if p]  # the template runs in /
        ours, theirs = socket.socketpair()
        try:
            process = subprocess.Popen(
                [sys.executable, "-s", "-P", "-c", _BOOTSTRAP, json.dumps(paths), str(limits.memory_bytes)],
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=_WORKER_ENV,
                cwd="/",
                start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            raise SandboxError(f"cannot start a sandbox worker: {exc}") from None
        finally:
            theirs.close()
        template = cls(process, ours)
        try:
            ready = template._receive(_STARTUP_TIMEOUT)
        except (WorkerDied, Deadline):
            template.stop()
            raise SandboxError("a sandbox worker failed to start (is edsb importable by the same Python?)") from None
        if ready.get("status") != "ready":
            template.stop()
            raise SandboxError(f"a sandbox worker failed to start: {ready.get('message', ready)}")
        return template

    def spawn(self, scenes: list[tuple[str, ...]], limits: SandboxLimits) -> _Worker:
        """A new worker, holding every scene of `scenes` the template could load; _TemplateDied if it is gone."""
        ours, theirs = socket.socketpair()
        payload = pickle.dumps({"op": "spawn", "scenes": scenes}, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            with self._lock:
                try:
                    socket.send_fds(self.control, [HEADER.pack(len(payload)) + payload], [theirs.fileno()])
                except OSError:
                    raise _TemplateDied() from None
                finally:
                    theirs.close()
                answer = self._receive(_LOAD_TIMEOUT)
        except (WorkerDied, Deadline):
            ours.close()
            raise _TemplateDied() from None
        except BaseException:
            ours.close()
            raise
        if answer.get("status") != "spawned":
            ours.close()
            raise SandboxError(f"a sandbox worker failed to start: {answer.get('message', answer)}")
        return _Worker(int(answer["pid"]), ours, self, {scene_key(spec) for spec in answer["scenes"]})

    def reap(self, pid: int) -> int | None:
        """The exit status of a worker that was killed or exited (as `Popen.returncode`); None if unknown."""
        if not self.alive:
            return None
        payload = pickle.dumps({"op": "reap", "pid": pid}, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            with self._lock:
                self.control.sendall(HEADER.pack(len(payload)) + payload)
                answer = self._receive(_REAP_TIMEOUT)
        except (OSError, WorkerDied, Deadline):
            self.stop()
            return None
        status = answer.get("status")
        return status if isinstance(status, int) else None

    def stop(self) -> None:
        if not self.alive:
            return
        self.alive = False
        with contextlib.suppress(OSError):
            self.process.kill()
        with contextlib.suppress(OSError):
            self.control.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)

    def _receive(self, timeout: float) -> dict[str, Any]:
        return self.answers.read(time.monotonic() + timeout, _CONTROL_ANSWER_BYTES)


class _Worker:
    """The parent's handle on one worker: its process id (a child of the template) and its socket."""

    def __init__(self, pid: int, channel: socket.socket, template: _Template, scenes: set[tuple[str, ...]]) -> None:
        self.pid = pid
        self.channel = channel
        self.answers = FrameReader(channel.fileno())
        self.template = template
        self.scenes = scenes  # scenes the worker holds: a run on one of them needs no "loaded" step
        self.runs = 0
        self.alive = True
        self.exit_status: int | None = None
        # A handle on this very process: signalling it can never hit another process that reused the id (possible
        # once the template is gone and no longer keeps its dead children unreaped).
        self.pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            self.pidfd = os.pidfd_open(pid)

    def idle_and_alive(self) -> bool:
        """An idle worker never writes: anything readable on its socket (end of file, at least) means it died."""
        if not self.alive or self.answers.buffer:
            return False
        poller = select.poll()
        poller.register(self.channel.fileno(), select.POLLIN)
        return not poller.poll(0)

    def run(self, request: dict[str, Any], limits: SandboxLimits, loaded: Callable[[tuple[Any, ...]], None]) -> RawPlan:
        self.runs += 1
        scene = scene_key(request["scene"])
        announce = scene not in self.scenes
        payload = pickle.dumps({**request, "announce": announce}, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.channel.sendall(HEADER.pack(len(payload)) + payload)
        except OSError:
            self.stop()
            raise _StaleWorker() from None
        try:
            if announce:
                response = self._receive(time.monotonic() + _LOAD_TIMEOUT, limits.max_result_bytes)
                if response.get("status") == "loaded":
                    self.scenes.add(scene)
                    loaded(request["scene"])
                    response = self._receive(time.monotonic() + limits.timeout, limits.max_result_bytes)
            else:
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
                return decode_raw_plan(response["plan"], response.get("output", ""), response.get("repaired") is True)
            if status == "error":
                error = CodeError(response["kind"], str(response["message"]))
                error.repaired = response.get("repaired") is True
                raise error
            if status == "fault":
                raise EdsbFault(str(response["message"]))
        except (KeyError, TypeError, ValueError, RecursionError, SandboxError) as exc:
            self.stop()
            raise CodeError(ErrorKind.CODE_CRASH, f"the sandbox worker sent a malformed answer ({exc!r})") from None
        raise SandboxError(str(response.get("message", "the sandbox worker failed")))

    def stop(self) -> None:
        """Kill the worker and collect its exit status (until then its process id cannot be reused)."""
        if not self.alive:
            return
        self.alive = False
        with contextlib.suppress(OSError):
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            elif self.template.alive:  # its dead children stay unreaped until it reaps them: the id is still theirs
                os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.channel.close()  # without a kill, the worker exits at the end of its input
        if self.pidfd is not None:
            os.close(self.pidfd)
        self.exit_status = self.template.reap(self.pid)

    def _death_error(self, detail: str) -> CodeError:
        code = self.exit_status
        if code is not None and code < 0 and -code == signal.SIGXCPU:
            return CodeError(ErrorKind.CODE_TIMEOUT, "TimeoutError: the code used up its CPU time")
        if code is not None and code < 0 and -code == signal.SIGKILL:
            return CodeError(ErrorKind.CODE_MEMORY, "MemoryError: the worker was killed (out of memory?)")
        return CodeError(ErrorKind.CODE_CRASH, f"the sandbox worker died ({detail}, exit status {code})")

    def _receive(self, deadline: float, max_result_bytes: int) -> dict[str, Any]:
        return self.answers.read(deadline, max_result_bytes)
