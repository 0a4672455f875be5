"""The parent's side of the sandbox: per `SandboxLimits`, a template process and the fresh children forked from it,
one per run, and the calls that hand a reply to a child and wait for its answer.

The template starts with a minimal environment (none of the parent's variables, so no API keys), in `/`, in its own
session, with stderr discarded; it imports everything, builds the kernel's filters and keeps the scenes, but never
runs model code. Every run gets a child of its own, forked from it: the child contains itself (`kernel`) at once,
says so in a first frame, waits for its request (on a scene the template loaded before forking it), runs the code
once and is killed as soon as it has answered, so nothing a run changes reaches a later one. `size` children (by
default one per core, whatever the runner's concurrency: a call waits for a free slot) are forked ahead and wait;
each one used is replaced in the background while the parent judges its run. The parent kills a child at its
wall-clock timeout, reads bounded frames, and checks the answer as untrusted data (`_answer`). The public functions
are thread-safe, so an asyncio runner can call them from a thread pool (`sandbox_threads`).

No process of a pool outlives it, nor edsb: the template is started from a thread that lives as long as the pool,
and it and every child get a parent-death signal (SIGKILL); `close` kills the children running code too, and
`kill_sandboxes_now` kills everything from a signal handler.
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
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from edsb.geometry.scene import Scene
from edsb.results import ErrorKind
from edsb.sandbox import kernel
from edsb.sandbox.code_api import ApiScene
from edsb.sandbox.errors import CodeError, EdsbFault, SandboxError, exception_text
from edsb.sandbox.limits import DEFAULT_LIMITS, CodeContext, SandboxLimits, SceneSource
from edsb.sandbox.wire import HEADER, Deadline, FrameReader, RawPlan, WorkerDied, decode_raw_plan, scene_key

# --- public entry points ----------------------------------------------------------------------------------------------


def execute_plan_code(reply: str, context: CodeContext, limits: SandboxLimits | None = None) -> RawPlan:
    """Run the code of a model reply (or bare code) in a fresh sandbox process: what it set, or CodeError for the
    model's failures (EdsbFault / SandboxError when edsb itself fails). Called from one of a pool's threads
    (`sandbox_threads`), it runs on that pool, so a call that starts as the pool closes fails instead of starting
    a new one."""
    limits = limits or DEFAULT_LIMITS
    pool: SandboxPool | None = getattr(_thread_pool, "pool", None)
    if pool is None or pool.limits != limits:
        pool = default_pool(limits)
    return pool.execute(reply, context)


def sandbox_threads(limits: SandboxLimits | None = None) -> ThreadPoolExecutor:
    """Threads for an event loop's sandbox calls (`loop.run_in_executor`): as many as the pool runs at once, so that
    no thread waits for a slot and no idle one competes for the GIL. At concurrency 256, asyncio's default pool
    (cores + 4 threads, four of them waiting on the workers) made the loop wait for the GIL at each hand-off."""
    return default_pool(limits or DEFAULT_LIMITS).threads


def check_sandbox(limits: SandboxLimits | None = None, scenes: Iterable[SceneSource] = ()) -> None:
    """Start the pool for these limits now, its first children forked and the template holding `scenes` (the
    benchmark scenes the runs will use, loaded once for all children): a setting that cannot work, such as a memory
    limit below what the template needs or `exact` on a host without the kernel's layers, is then one SandboxError
    before any run instead of a failure of each, and no run waits for the template or a scene."""
    default_pool(limits or DEFAULT_LIMITS).warm_up(scenes)


_pools: dict[SandboxLimits, SandboxPool] = {}
_thread_pool = threading.local()  # in a pool's own threads, `.pool`: that pool
_pools_lock = threading.Lock()


def default_pool(limits: SandboxLimits) -> SandboxPool:
    """The process-wide pool for these limits, created on first use and closed at interpreter exit."""
    with _pools_lock:
        pool = _pools.get(limits)
        if pool is None:
            pool = _pools[limits] = SandboxPool(limits)
        return pool


def shutdown_sandboxes() -> None:
    """Stop every process of every default pool, the children running code included."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()


def _close_every_pool() -> None:
    """At exit: every pool still open, default or not."""
    for pool in list(_open_pools):
        pool.close()


def kill_sandboxes_now() -> None:
    """SIGKILL every process of every pool at once, without waiting for any (for a process about to exit: the
    template's own exit reaps the children). Takes no lock, so that a signal handler can call it whatever the
    interrupted code held."""
    for pool in list(_open_pools):
        pool.kill_now()


_open_pools: set[SandboxPool] = set()  # every pool not closed yet, default or not

atexit.register(_close_every_pool)


def default_workers() -> int:
    """Runs at once per pool by default: one per core this process may use (at most 8). A run keeps its process
    for a few milliseconds, so more than cores would only add processes, never throughput."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


class SandboxPool:
    """Runs of one `SandboxLimits`, each in a fresh child forked from one template process; `execute` may be called
    from many threads (at most `size` runs at once, the others wait). `size` children are forked ahead and wait for
    a request, so a run does not wait for its fork: each one used is replaced in the background."""

    def __init__(self, limits: SandboxLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self.size = limits.workers or default_workers()
        self._slots = threading.BoundedSemaphore(self.size)
        self.threads = ThreadPoolExecutor(
            self.size, thread_name_prefix="edsb-sandbox", initializer=setattr, initargs=(_thread_pool, "pool", self)
        )
        # One thread forks children ahead (its requests to the template are serial anyway).
        self._forker = ThreadPoolExecutor(1, thread_name_prefix="edsb-fork")
        # One thread starts every template, and lives as long as the pool: a template dies with the thread that
        # started it (its parent-death signal), and a caller's thread may end first.
        self._launcher = ThreadPoolExecutor(1, thread_name_prefix="edsb-template")
        self._templates: list[_Template] = []  # every template started and not stopped by `close`
        self._forking = False
        self._idle: list[_Child] = []
        self._lock = threading.Lock()
        self._closed = False
        self._template: _Template | None = None
        self._template_lock = threading.Lock()
        # Benchmark scenes given at start or asked for by a run, loaded here (renamed if perturbed) and pickled: the
        # template unpickles each once, before it forks the children that run on them. It never opens the data, so
        # it holds no test case and no perturbation seed: only the scenes, as a run's API sees them.
        self._scenes: dict[tuple[str, ...], bytes] = {}  # ("held", digest) -> pickle
        self._sources: dict[SceneSource, tuple[tuple[str, ...], bytes] | SandboxError] = {}  # or why not
        # What every child applies when it is forked, before any request (`worker._serve_one`).
        self._settings = {
            "sandbox": limits.sandbox,
            "memory_bytes": limits.memory_bytes,
            "cpu_seconds": limits.cpu_budget,
        }
        # Inline scenes, pickled once: id(scene) -> (scene, digest, pickle).
        self._blobs: dict[int, tuple[Scene | ApiScene, str, bytes]] = {}
        _open_pools.add(self)

    def execute(self, reply: str, context: CodeContext) -> RawPlan:
        """What the reply's code set; CodeError for the model's failures, EdsbFault / SandboxError for edsb's."""
        request = self._request(reply, context)
        scene = scene_key(request["scene"])
        with self._slots:
            try:
                for _ in range(3):
                    child = self._checkout(scene)
                    try:
                        return child.run(request, self.limits)
                    except _StaleChild:
                        continue  # it died while idle: the request never reached it
                    finally:
                        child.retire()
                raise SandboxError("sandbox processes keep dying before they accept work")
            finally:
                self._fork_ahead()

    def warm_up(self, scenes: Iterable[SceneSource] = ()) -> None:
        """Start the template and fork `size` children now, the template holding `scenes` first so that every child
        has them (a scene that cannot be loaded is reported by the runs that use it); raises SandboxError if the
        template cannot start. Calls may run meanwhile (a runner warms its pool up while its first requests are
        out): one that finds no idle child forks its own."""
        for scene in scenes:
            with contextlib.suppress(SandboxError):
                self._hold(scene)
        self._fill()

    def idle_pids(self) -> list[int]:
        """The process ids of the children forked ahead (for tests and benchmarks)."""
        with self._lock:
            return [child.pid for child in self._idle]

    def close_idle(self) -> None:
        """Stop the children forked ahead (the next call forks a fresh one); the template stays."""
        with self._lock:
            idle, self._idle = self._idle, []
        for child in idle:
            child.stop()

    @property
    def template_pid(self) -> int | None:
        template = self._template
        return None if template is None else template.process.pid

    def close(self) -> None:
        """Stop every process of the pool, without waiting for any run: the children running code are killed (their
        calls raise SandboxError), then the template kills and reaps the rest and exits (killed if it lingers)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            templates, self._templates = self._templates, []
        self.threads.shutdown(wait=False, cancel_futures=True)  # a call still queued never starts
        for template in templates:
            template.close()
        for child in idle:
            child.retire()
        self._forker.shutdown(wait=True)
        self._launcher.shutdown(wait=True)
        _open_pools.discard(self)

    def kill_now(self) -> None:
        """SIGKILL every child and template of the pool, waiting for none (`kill_sandboxes_now`)."""
        for template in list(self._templates):
            template.kill_now()

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, reply: str, context: CodeContext) -> dict[str, Any]:
        scene: tuple[str, ...] | tuple[str, str, bytes]
        if isinstance(context.scene, SceneSource):
            scene = self._hold(context.scene)
        else:
            scene = ("inline", *self._scene_blob(context.scene))
        return {
            "reply": reply,
            "scene": scene,
            "latest_plans": context.latest_plans,
            "seed": context.seed,
            "max_printed_chars": self.limits.max_printed_chars,
            "max_result_bytes": self.limits.max_result_bytes,
            "max_plan_bytes": self.limits.max_plan_bytes,
        }

    def _scene_blob(self, scene: Scene | ApiScene) -> tuple[str, bytes]:
        """An inline scene's pickle, as the API sees it (an `ApiScene`: the child needs nothing of the data layer
        to load it), and its digest; made once per scene object."""
        with self._lock:
            cached = self._blobs.get(id(scene))
            if cached is None or cached[0] is not scene:
                api_scene = scene if isinstance(scene, ApiScene) else ApiScene(scene)
                blob = pickle.dumps(api_scene, protocol=pickle.HIGHEST_PROTOCOL)
                cached = self._blobs[id(scene)] = (scene, hashlib.sha256(blob).hexdigest(), blob)
            return cached[1], cached[2]

    def _hold(self, source: SceneSource) -> tuple[str, ...]:
        """The key of a benchmark scene the template holds for every child it forks from now on (loaded here on
        first use); SandboxError if it cannot be loaded. The children forked ahead without it are replaced."""
        with self._lock:
            known = self._sources.get(source)
        if known is None:
            known = _load_source(source)
            with self._lock:
                known = self._sources.setdefault(source, known)
        if isinstance(known, SandboxError):
            raise known
        key, blob = known
        with self._lock:
            if key in self._scenes:
                return key
            self._scenes[key] = blob
            stale = [child for child in self._idle if key not in child.scenes]
            self._idle = [child for child in self._idle if key in child.scenes]
        for child in stale:
            child.retire()
        return key

    def _checkout(self, scene: tuple[str, ...]) -> _Child:
        """An idle child that holds `scene` (any, for an inline scene), else a new one; SandboxError if the template
        cannot load the scene."""
        dead: list[_Child] = []
        found = None
        with self._lock:
            if self._closed:
                raise SandboxError("the sandbox pool is closed")
            for child in list(self._idle):
                if not child.idle_and_alive():
                    self._idle.remove(child)
                    dead.append(child)
                elif scene[0] != "held" or scene in child.scenes:
                    self._idle.remove(child)
                    found = child
                    break
        for child in dead:
            child.stop()
        if found is not None:
            return found
        [child] = self._spawn()
        if scene[0] == "held" and scene not in child.scenes:
            child.retire()
            raise SandboxError(child.template.unloadable.get(scene, "cannot load the scene in the sandbox"))
        return child

    def _fork_ahead(self) -> None:
        """Replace the children used, in the background, while the parent judges their runs."""
        with self._lock:
            if self._forking or self._closed or len(self._idle) >= self.size:
                return
            self._forking = True
        try:
            self._forker.submit(self._fill_in_background)
        except RuntimeError:  # shut down by close()
            with self._lock:
                self._forking = False

    def _fill_in_background(self) -> None:
        try:
            self._fill()
        except SandboxError:
            pass  # the next run forks its own child and reports the failure
        finally:
            with self._lock:
                self._forking = False

    def _fill(self) -> None:
        while True:
            with self._lock:
                missing = 0 if self._closed else self.size - len(self._idle)
            if missing <= 0:
                return
            children = self._spawn(min(missing, _FORK_BATCH))
            with self._lock:
                room = 0 if self._closed else self.size - len(self._idle)
                self._idle += children[:room]
                extra = children[room:]
            for child in extra:
                child.stop()
            if extra:
                return

    def _spawn(self, count: int = 1) -> list[_Child]:
        """New children forked from the template (started, or restarted if it died, on first need)."""
        with self._lock:
            scenes = dict(self._scenes)
            sources = list(self._sources)
        with self._template_lock:
            if self._closed:
                raise SandboxError("the sandbox pool is closed")
            for attempt in range(2):
                if self._template is None or not self._template.alive:
                    self._template = self._start_template(sources)
                try:
                    return self._template.spawn(scenes, count, self._settings)
                except _TemplateDied:
                    self._template.stop()
                    with self._lock:
                        if self._template in self._templates:
                            self._templates.remove(self._template)
                    self._template = None
                    if self._closed:
                        raise SandboxError("the sandbox pool is closed") from None
                    if attempt:
                        raise SandboxError("the sandbox template process keeps dying") from None
        raise AssertionError("unreachable")

    def _start_template(self, sources: list[SceneSource]) -> _Template:
        """A new template, started from the pool's own thread (it dies with that thread) and known to `close` from
        then on, even before it is ready."""
        try:
            template = self._launcher.submit(_Template.launch, self.limits, _data_directories(sources)).result()
        except RuntimeError:  # the launcher is shut down: the pool is closing
            raise SandboxError("the sandbox pool is closed") from None
        with self._lock:
            closed = self._closed
            if not closed:
                self._templates.append(template)
        if closed:
            template.stop()
            raise SandboxError("the sandbox pool is closed")
        template.wait_until_ready()
        return template


# --- the parent's side of the template and the workers ----------------------------------------------------------------

_STARTUP_TIMEOUT = 120.0  # seconds for the template to import its modules
_LOAD_TIMEOUT = 120.0  # seconds to load a scene and contain a child (or, in the template, to load and fork)
_REAP_TIMEOUT = 5.0  # seconds for a killed child's exit status
_CLOSE_GRACE = 1.0  # seconds for a closed template to kill and reap its children and exit
_EXIT_GRACE = 0.5  # seconds (within the run's limit) for a child whose channel ended to exit on its own
_WORKER_ENV = {
    "PYTHONHASHSEED": "0",  # set iteration in model code is reproducible from run to run
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONIOENCODING": "utf-8",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "LC_ALL": "C.UTF-8",
}


def _template_env() -> dict[str, str]:
    """The template's whole environment: `_WORKER_ENV`, and the probe's simulation of a weaker host (tests), so that
    the template and the parent agree on what the host supports."""
    probe = os.environ.get(kernel.PROBE_ENV)
    return _WORKER_ENV if probe is None else {**_WORKER_ENV, kernel.PROBE_ENV: probe}


_BOOTSTRAP = (
    "import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
    "from edsb.sandbox.worker import template_main; template_main()"
)
_CONTROL_ANSWER_BYTES = 1 << 16
_READY_READ_TIMEOUT = 1.0  # seconds to read the rest of a first frame that has begun to arrive
_FORK_BATCH = 32  # children asked of the template at once (it accepts up to `worker._MAX_BATCH` descriptors)


def _data_directories(sources: Iterable[SceneSource]) -> list[str]:
    """Every data directory edsb knows of (the scenes' own, `$EDSB_DATA`'s, the default), for the template to fence
    off: worked out here, so that the template never imports the data layer."""
    from edsb.data.location import default_data_dir, resolve_data_dir

    found = {source.data_dir for source in sources}
    for where in (resolve_data_dir, default_data_dir):
        with contextlib.suppress(Exception):
            found.add(str(where()))
    return sorted(found)


def _load_source(source: SceneSource) -> tuple[tuple[str, ...], bytes] | SandboxError:
    """A benchmark scene as the API sees it (renamed if perturbed), pickled, and its key; or why it cannot load."""
    from edsb.data.benchmark import Benchmark
    from edsb.geometry.scene import load_scene

    try:
        scene = ApiScene(load_scene(Benchmark.open(source.data_dir, perturb=source.perturb), source.scene_name))
        blob = pickle.dumps(scene, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        return SandboxError(f"cannot load the scene: {exception_text(exc)}")
    return ("held", hashlib.sha256(blob).hexdigest()), blob


class _StaleChild(Exception):
    pass


class _TemplateDied(Exception):
    pass


# What an answer may say it is: the child's frames after "contained" are the model's to forge, so an error is only
# believed as one of the model's own kinds.
_CODE_KINDS = frozenset(kind for kind in ErrorKind if kind.value.startswith("code_"))


class _Template:
    """The template process: forks children on request and reaps them (they are its children)."""

    def __init__(self, process: subprocess.Popen[bytes], control: socket.socket) -> None:
        self.process = process
        self.control = control
        self.answers = FrameReader(control)
        self.alive = True
        self._lock = threading.Lock()  # one request and its answer at a time
        self._done: list[int] = []  # children killed after their run, reaped with the next request
        self.unloadable: dict[tuple[str, ...], str] = {}  # scenes it could not load, and why
        self.sent: set[tuple[str, ...]] = set()  # scenes it was given (each pickle crosses once)
        self.children: dict[int, _Child] = {}  # every child not killed yet, idle or running code

    @classmethod
    def launch(cls, limits: SandboxLimits, data: list[str]) -> _Template:
        """The template process, started (`wait_until_ready` waits for its imports); `data`: the data directories no
        Landlock read rule may cover. It dies with the calling thread."""
        if limits.sandbox == "exact":
            support = kernel.host_support()
            if not support.exact:
                raise SandboxError(f"the exact sandbox cannot run on this host: {support.reason}")
        paths = [os.path.abspath(p) for p in sys.path if p]  # the template runs in /
        ours, theirs = socket.socketpair()
        try:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-s",
                    "-P",
                    "-c",
                    _BOOTSTRAP,
                    json.dumps(paths),
                    str(limits.memory_bytes),
                    json.dumps(data),
                    limits.sandbox,
                    str(os.getpid()),  # its parent: a template that outlived this process exits at once
                ],
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=_template_env(),
                cwd="/",
                start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            raise SandboxError(f"cannot start the sandbox: {exc}") from None
        finally:
            theirs.close()
        return cls(process, ours)

    def wait_until_ready(self) -> None:
        """Wait for the template's first frame; SandboxError (and the template stopped) if it cannot start."""
        try:
            ready = self._receive(_STARTUP_TIMEOUT)
        except (OSError, WorkerDied, Deadline):
            self.stop()
            raise SandboxError("the sandbox failed to start (is edsb importable by the same Python?)") from None
        if ready.get("status") != "ready":
            self.stop()
            raise SandboxError(f"the sandbox failed to start: {ready.get('message', ready)}")

    def spawn(self, scenes: dict[tuple[str, ...], bytes], count: int, settings: dict[str, Any]) -> list[_Child]:
        """`count` new children (one request: the template's loop and this round trip are paid once), holding every
        scene of `scenes` the template could load; _TemplateDied if it is gone."""
        pairs = [socket.socketpair() for _ in range(count)]
        try:
            with self._lock:
                new = [(*key, blob) for key, blob in scenes.items() if key not in self.sent]
                self.sent.update(scenes)
                command = {"op": "spawn", "scenes": new, "settings": settings}
                done, self._done = self._done, []
                payload = pickle.dumps({**command, "done": done}, pickle.HIGHEST_PROTOCOL)
                try:
                    fds = [theirs.fileno() for _, theirs in pairs]
                    data = HEADER.pack(len(payload)) + payload  # scene pickles make it large the first time
                    sent = socket.send_fds(self.control, [data], fds)
                    self.control.sendall(data[sent:])
                except OSError:
                    raise _TemplateDied() from None
                finally:
                    for _, theirs in pairs:
                        theirs.close()
                answer = self._receive(_LOAD_TIMEOUT)
        except (WorkerDied, Deadline):
            for ours, _ in pairs:
                ours.close()
            raise _TemplateDied() from None
        except BaseException:
            for ours, _ in pairs:
                ours.close()
            raise
        pids = answer.get("pids")
        if answer.get("status") != "spawned" or not isinstance(pids, list) or len(pids) != count:
            for ours, _ in pairs:
                ours.close()
            raise SandboxError(f"the sandbox failed to fork: {answer.get('message', answer)}")
        held = {scene_key(spec) for spec in answer["scenes"]}
        self.unloadable.update((scene_key(key), str(message)) for key, message in answer["unloadable"])
        children = []
        for pid, (ours, _) in zip(pids, pairs, strict=True):
            if pid is None:  # the kernel refused this fork (the template retried a while, and lives on)
                ours.close()
            else:
                children.append(_Child(int(pid), ours, self, set(held)))
        if not children:
            raise SandboxError(f"the sandbox failed to fork: {answer.get('message', answer)}")
        return children

    def reap(self, pid: int) -> int | None:
        """The exit status of a child that was killed or exited (as `Popen.returncode`); None if unknown."""
        if not self.alive:
            return None
        try:
            with self._lock:
                done, self._done = self._done, []
                payload = pickle.dumps({"op": "reap", "pid": pid, "done": done}, pickle.HIGHEST_PROTOCOL)
                self.control.sendall(HEADER.pack(len(payload)) + payload)
                answer = self._receive(_REAP_TIMEOUT)
        except (OSError, WorkerDied, Deadline):
            self.stop()
            return None
        status = answer.get("status")
        return status if isinstance(status, int) else None

    def reap_later(self, pid: int) -> None:
        """Reap a killed child with the next request (its exit status is not needed), without a round trip now."""
        with self._lock:
            if self.alive:
                self._done.append(pid)

    def stop(self) -> None:
        """Kill the template (its children die with it)."""
        if not self.alive:
            return
        self.alive = False
        with contextlib.suppress(OSError):
            self.process.kill()
        with contextlib.suppress(OSError):
            self.control.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)

    def close(self) -> None:
        """Kill the children running code, then end the template: told by the end of its input, it kills and reaps
        the others and exits; killed if it has not within `_CLOSE_GRACE` (busy forking, say)."""
        for child in list(self.children.values()):
            child.kill_now()
        if not self.alive:
            return
        self.alive = False
        with contextlib.suppress(OSError):
            self.control.shutdown(socket.SHUT_RDWR)  # also wakes a thread waiting for its answer
        try:
            self.process.wait(timeout=_CLOSE_GRACE)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                self.process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
        with contextlib.suppress(OSError):
            self.control.close()

    def kill_now(self) -> None:
        """SIGKILL every child and the template, waiting for none and taking no lock."""
        for child in list(self.children.values()):
            child.kill_now()
        if self.process.returncode is None:  # not reaped yet, so the id is still its own
            with contextlib.suppress(OSError):
                os.kill(self.process.pid, signal.SIGKILL)

    def _receive(self, timeout: float) -> dict[str, Any]:
        return self.answers.read(time.monotonic() + timeout, _CONTROL_ANSWER_BYTES)


class _Child:
    """The parent's handle on one child: its process id (a child of the template) and its socket. A child serves
    one run; the parent kills it once it has the answer (the code may still be running, having forged one)."""

    def __init__(self, pid: int, channel: socket.socket, template: _Template, scenes: set[tuple[str, ...]]) -> None:
        self.pid = pid
        self.channel = channel
        self.answers = FrameReader(channel)
        self.template = template
        self.scenes = scenes  # scenes the child holds: a run on another one loads it first
        self.alive = True
        self.ready: dict[str, Any] | None = None  # the child's first frame, once read
        self.exit_status: int | None = None
        # A handle on this very process: signalling it can never hit another process that reused the id (possible
        # once the template is gone and no longer keeps its dead children unreaped).
        self.pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            self.pidfd = os.pidfd_open(pid)
        self.shut_down = False  # killed by the pool's `close`, not by its run
        self._killing = threading.Lock()  # the run's thread and `close` may both kill it
        template.children[pid] = self

    def idle_and_alive(self) -> bool:
        """Whether an idle child can take a run. It writes one frame once contained, then nothing until it has a
        request: that frame is read here (without waiting), and anything readable after it (end of file, at least)
        means it died."""
        if not self.alive:
            return False
        poller = select.poll()
        poller.register(self.channel.fileno(), select.POLLIN)
        if not self.answers.buffer and not poller.poll(0):
            return True  # still containing itself, or waiting for its request
        if self.ready is not None:
            return False
        try:
            self.ready = self.answers.read(time.monotonic() + _READY_READ_TIMEOUT, _CONTROL_ANSWER_BYTES)
        except (WorkerDied, Deadline):
            return False
        return not self.answers.buffer and not poller.poll(0)

    def run(self, request: dict[str, Any], limits: SandboxLimits) -> RawPlan:
        # The first frame is the child's own, sent once it is contained, before it reads a request (so usually
        # read already by `idle_and_alive`): trusted. None comes from a child that died while idle.
        try:
            ready = self.ready or self.answers.read(time.monotonic() + _LOAD_TIMEOUT, _CONTROL_ANSWER_BYTES)
        except WorkerDied:
            raise _StaleChild() from None
        except Deadline:
            raise SandboxError("a sandbox process did not get ready in time") from None
        if ready.get("status") != "contained":
            raise SandboxError(str(ready.get("message", ready)))
        payload = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.channel.sendall(HEADER.pack(len(payload)) + payload)
        except OSError:
            raise _StaleChild() from None
        if request["scene"][0] != "held":
            self._loaded(limits)
        # Everything after it may be the model's: the wall-clock limit starts now, and the answer is data to check.
        deadline = time.monotonic() + limits.timeout
        try:
            response = self.answers.read(deadline, limits.max_result_bytes)
        except Deadline:
            raise CodeError(
                ErrorKind.CODE_TIMEOUT, f"TimeoutError: the code ran longer than {limits.timeout:g} s"
            ) from None
        except WorkerDied as died:
            if self.shut_down:  # the pool closed during the run: no verdict on the model's code
                self.stop()
                raise SandboxError("the sandbox was shut down during the run") from None
            if died.args != ("end of output",):  # a frame that is no answer: the model's, written to the channel
                raise CodeError(ErrorKind.CODE_CRASH, f"the sandbox process sent a malformed answer ({died})") from None
            lingering = not self._exits_within(min(_EXIT_GRACE, deadline - time.monotonic()))
            self.stop()
            if lingering:  # the parent's kill, not an out-of-memory one: say so
                raise CodeError(ErrorKind.CODE_CRASH, "the code closed its answer channel and kept running") from None
            if self.exit_status is None and not self.template.alive:  # it died with its template: edsb's failure
                raise SandboxError("the sandbox template process died during the run") from None
            raise self._death_error(str(died)) from None
        return _answer(response, limits)

    def _exits_within(self, seconds: float) -> bool:
        """Whether the child ends on its own within `seconds` (True when unknown, without a pidfd). A dying process
        closes its channel a moment before it exits; one still running after that closed the channel itself."""
        if self.pidfd is None:
            return True
        poller = select.poll()
        poller.register(self.pidfd, select.POLLIN)
        return bool(poller.poll(max(0, int(seconds * 1000))))

    def _loaded(self, limits: SandboxLimits) -> None:
        """Read the frame a child sends once it has unpickled an inline scene, before any model code runs (so it is
        trusted): a scene it cannot load is edsb's SandboxError, never the model's failure."""
        try:
            loaded = self.answers.read(time.monotonic() + _LOAD_TIMEOUT, _CONTROL_ANSWER_BYTES)
        except (WorkerDied, Deadline) as exc:
            self.stop()
            raise SandboxError(f"a sandbox process failed loading its scene ({exc})") from None
        status = loaded.get("status")
        if status == "error":  # a MemoryError while unpacking it: the run's code_memory, as before
            _answer(loaded, limits)  # raises the CodeError
        if status != "loaded":
            raise SandboxError(str(loaded.get("message", loaded)))

    def retire(self) -> None:
        """Kill the child (done with its run, or never used) and have the template reap it later."""
        if self._kill():
            self.template.reap_later(self.pid)

    def stop(self) -> None:
        """Kill the child and collect its exit status now (for `_death_error`)."""
        if self._kill():
            self.exit_status = self.template.reap(self.pid)

    def kill_now(self) -> None:
        """SIGKILL the child and nothing else (no lock, no descriptor closed): whoever runs it sees its end and
        cleans up; used when the pool closes, and by a signal handler."""
        self.shut_down = True
        self._signal()

    def _signal(self) -> None:
        with contextlib.suppress(OSError):
            pidfd = self.pidfd
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            elif self.template.alive:  # its dead children stay unreaped until it reaps them: the id is still theirs
                os.kill(self.pid, signal.SIGKILL)

    def _kill(self) -> bool:
        with self._killing:
            if not self.alive:
                return False
            self.alive = False
            self._signal()
            self.template.children.pop(self.pid, None)
            with contextlib.suppress(OSError):
                self.channel.close()
            if self.pidfd is not None:
                os.close(self.pidfd)
                self.pidfd = None
            return True

    def _death_error(self, detail: str) -> CodeError:
        code = self.exit_status
        if code is not None and code < 0 and -code == signal.SIGXCPU:
            return CodeError(ErrorKind.CODE_TIMEOUT, "TimeoutError: the code used up its CPU time")
        if code is not None and code < 0 and -code == signal.SIGKILL:
            return CodeError(ErrorKind.CODE_MEMORY, "MemoryError: the sandbox process was killed (out of memory?)")
        return CodeError(ErrorKind.CODE_CRASH, f"the sandbox process died ({detail}, exit status {code})")


def _answer(response: dict[str, Any], limits: SandboxLimits) -> RawPlan:
    """A child's answer, checked as untrusted data: a plan, or one of the model's own error kinds. Only the
    restricted sandbox may report a fault of edsb's (its guards and blame run in the child, and no model code can
    reach the channel there); under `exact`, a "fault" can only be forged, and is the model's malformed answer."""
    status = response.get("status")
    try:
        if status == "ok":
            # The child refuses a plan over `max_plan_bytes`, which bounds the sampler's work here; a plan the code
            # forged on the channel skipped that check, so it is measured again, the same way.
            size = len(json.dumps(response["plan"], allow_nan=True))
            if size > limits.max_plan_bytes:
                raise CodeError(ErrorKind.CODE_OUTPUT, f"the plan is too large ({size} bytes)")
            output = str(response.get("output", ""))[: limits.max_printed_chars]
            return decode_raw_plan(response["plan"], output, response.get("repaired") is True)
        if status == "error" and response["kind"] in _CODE_KINDS:
            error = CodeError(ErrorKind(response["kind"]), str(response["message"]))
            error.repaired = response.get("repaired") is True
            raise error
        if status == "fault" and limits.sandbox == "restricted":
            raise EdsbFault(str(response["message"]))
    except (KeyError, TypeError, ValueError, RecursionError, SandboxError) as exc:
        raise CodeError(ErrorKind.CODE_CRASH, f"the sandbox process sent a malformed answer ({exc!r})") from None
    raise CodeError(ErrorKind.CODE_CRASH, f"the sandbox process sent a malformed answer (status {str(status)[:40]!r})")
