"""`edsb run`: expand the configuration into run keys, resume what a directory already holds, execute the rest,
and return every result the directory holds (the report summarises them)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from edsb.data.benchmark import Benchmark
from edsb.errors import UsageError
from edsb.llm import (
    ChatModel,
    LocalChatModel,
    ReplayChatModel,
    RetryPolicy,
    TranscriptWriter,
    build_model,
    tell_window_note,
    transcripts_dir,
    window_note_of,
)
from edsb.llm.batch import RequestDeferred
from edsb.planning.pipeline import RunServices, execute_run
from edsb.planning.variants import get_variant
from edsb.results import RunKey, RunResult
from edsb.results.batches import read_batches
from edsb.results.rundir import ResultStore, RunDirLock, load_results
from edsb.runner.config import RunConfig, check_resume, with_sampler_secret
from edsb.runner.keys import expand_keys, longest_first
from edsb.runner.loop import EndpointUnreachable, LoopStats, end_progress_now, run_keys
from edsb.sandbox import (
    SandboxError,
    SandboxLimits,
    SceneSource,
    check_sandbox,
    kill_sandboxes_now,
    shutdown_sandboxes,
)

# One thread starts sandbox pools while a sweep's first requests go out (see run_benchmark).
_SANDBOX_STARTER = ThreadPoolExecutor(1, thread_name_prefix="edsb-sandbox-start")


@dataclass
class RunOutcome:
    out: Path
    keys: list[RunKey]
    skipped: int
    stats: LoopStats
    results: list[RunResult]  # everything the directory holds now, this pass and earlier ones
    runs_planned: int  # the keys asked for by this and earlier passes
    stopped_by: int = signal.SIGINT  # the signal that stopped the sweep, if `interrupted`

    @property
    def interrupted(self) -> bool:
        return self.stats.interrupted

    @property
    def exit_status(self) -> int:
        """What edsb exits with once a signal stopped the sweep (`stop_status`)."""
        return stop_status(self.stopped_by)


def check_out_dir(out: Path) -> None:
    """Refuse an --out that can never become a writable directory, without creating anything yet."""
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing == out and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a directory")
    if not existing.is_dir():
        raise UsageError(f"--out {out}: cannot create the run directory ({existing} is not a directory)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out}: cannot create the run directory ({existing} is not writable)")


def prepare_out_dir(out: Path) -> None:
    """Create the run directory, searchable by its owner alone: where a sandbox child cannot have a private file
    view, it runs as another user, and then cannot even `stat` what the directory holds (SECURITY.md). A directory
    that exists already keeps its mode."""
    try:
        out.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create the run directory ({exc.strerror})") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out}: the run directory is not writable")


def run_benchmark(
    config: RunConfig,
    out: Path,
    *,
    quiet: bool = False,
    console: Console | None = None,
    retry: RetryPolicy | None = None,
    wrap: Callable[[ChatModel], ChatModel] | None = None,
) -> RunOutcome:
    """Run every key of `config` that `out` does not hold yet; return the results of the whole directory.

    `retry` replaces the default backoff of remote models (`config.max_retries` then does not apply). `wrap`: what
    the model is seen through (`--batch`: a run whose request must wait for a batch raises `RequestDeferred` and is
    not recorded this pass).
    """
    # 1. The runs asked for.
    benchmark = Benchmark.open(config.data, perturb=config.perturb)
    keys = _keys(config, benchmark)
    # 2. Everything that can refuse the configuration (model spec, API key, replay directory) is checked before
    # config.json is written, so a typo never leaves a run directory that blocks the fix; a sandbox that cannot
    # start with the code limits removes the directory it was given.
    check_out_dir(out)
    created = not out.exists()
    prepare_out_dir(out)
    limits = config.sandbox_limits
    model = _open_model(config, benchmark, retry, out if created else None, keys)
    # Another edsb on this directory: one line, before the sandbox starts. The lock is held from here, before
    # config.json is written, to the last result line.
    with RunDirLock(out):
        model = model if wrap is None else wrap(model)
        # 3. The sandbox pool starts in the background while the first requests are on their way.
        sandbox = _start_sandbox(benchmark, keys, limits)
        console = console or Console(stderr=True)
        # Ollama cutting the prompts to its context window is said when first seen, and again when the sweep ends.
        tell_window_note(model, lambda note: console.print(f"warning: {note}", markup=False, highlight=False))
        config = with_sampler_secret(out, config)
        for note in [*check_resume(out, config), *_secret_notes(config), *([] if wrap else _batch_notes(out))]:
            console.print(f"note: {note}", markup=False, highlight=False)
        # 4. The sweep over the keys the directory does not hold yet.
        transcripts = TranscriptWriter(transcripts_dir(out))
        # A run's transcript is appended when the run is committed, just before its result line.
        store = ResultStore(out, before_line=lambda result: transcripts.write_run(result.run_key.file_stem))
        finished = store.open()
        pending = longest_first([key for key in keys if key.id not in finished])
        services = _services(config, benchmark, model, limits, transcripts)
        stop_message = _stop_message(out, keys)
        sweep = _Sweep(services, pending, store, transcripts, config.concurrency, quiet, console, stop_message, sandbox)
        stats = sweep.run(out, created)
        if cut := window_note_of(model):  # Ollama cut the prompts to its context window
            console.print(f"warning: {cut}", markup=False, highlight=False)
        # 5. Everything the directory holds now, this pass and earlier ones.
        results = load_results(out)
        if stats.interrupted:
            console.print(f"interrupted: {stop_message()}", markup=False, highlight=False)
        planned = {key.id for key in keys} | {result.key for result in results}
        return RunOutcome(out, keys, len(keys) - len(pending), stats, results, len(planned), sweep.stopped_by)


def _batch_notes(out: Path) -> list[str]:
    """A synchronous pass over a directory whose batches may still be in flight asks their requests again."""
    waiting = [record.number for record in read_batches(out) if record.stage in ("intent", "submitted")]
    if not waiting:
        return []
    return [f"{len(waiting)} batch(es) of `edsb run --batch` may still be in flight here; this run asks their "
            "requests again (the same command with --batch collects them instead)"]  # fmt: skip


def _secret_notes(config: RunConfig) -> list[str]:
    """An empty sampler secret (given, or a directory written before secrets) draws the PI points from the seed
    alone, which model code can see: fine for reproducing earlier figures, not for scoring a model that might
    cheat."""
    if config.sampler_secret != "":
        return []
    return ["the sampler secret is empty: model code can predict the PI sampler's draws (use it only to reproduce "
            "earlier results; a new directory gets a secret of its own)"]  # fmt: skip


def _keys(config: RunConfig, benchmark: Benchmark) -> list[RunKey]:
    """The run keys of the configuration; unknown variants and an empty selection fail before anything is
    written."""
    for variant in config.variants:
        get_variant(variant)
    keys = expand_keys(config.variants, config.cases, config.distraction, config.repeats, benchmark.cases)
    if not keys:
        raise UsageError("the selection contains no run (check --cases against --distraction: PI cases have level 0)")
    return keys


def _open_model(
    config: RunConfig, benchmark: Benchmark, retry: RetryPolicy | None, created: Path | None, keys: list[RunKey]
) -> ChatModel:
    """The model of the configuration; a model that refuses it (a replay that did not record these runs) removes the
    run directory just `created`."""
    try:
        model = build_model(
            config.model,
            base_url=config.base_url,
            api_key_env=config.api_key_env,
            timeout=config.timeout,
            max_retries=config.max_retries,
            max_in_flight=config.concurrency,
            max_response_bytes=config.max_response_mb << 20,
            cache=config.cache,
            retry=retry,
            data=benchmark.root,
            perturb=config.perturb,
            prompt_cache=config.prompt_cache,
        )
        if isinstance(model, ReplayChatModel):
            model.require_runs(keys)
        return model
    except BaseException:
        if created is not None:
            created.rmdir()
        raise


def _start_sandbox(benchmark: Benchmark, keys: list[RunKey], limits: SandboxLimits) -> Future[None]:
    """Start the sandbox pool in the background, its template holding every scene the runs use (loaded once for
    all workers): a run's code waits for it, and a pool that cannot start stops the sweep with its error."""
    scenes = sorted({benchmark.cases[key.case].scene_name for key in keys})
    sources = [SceneSource.of(benchmark.root, name, benchmark.perturb) for name in scenes]
    return _SANDBOX_STARTER.submit(check_sandbox, limits, sources)


def _services(
    config: RunConfig, benchmark: Benchmark, model: ChatModel, limits: SandboxLimits, transcripts: TranscriptWriter
) -> RunServices:
    return RunServices(
        benchmark=benchmark,
        model=model,
        generation=config.generation,
        seed=config.seed,
        sampler_secret=config.sampler_secret or "",
        sampler=config.sampler,
        limits=limits,
        transcripts=transcripts,
        plan_limits=config.plan_limits,
        text_limits=config.text_limits,
    )


def _stop_message(out: Path, keys: list[RunKey]) -> Callable[[], str]:
    """What a stopped sweep says it kept: the judged results of the keys asked for, and how to resume."""
    wanted = {key.id for key in keys}

    def message() -> str:
        done = sum(result.is_judged and result.key in wanted for result in load_results(out))
        return f"{done} of {len(keys)} results kept in {out}; rerun the same command to resume"

    return message


@dataclass
class _Sweep:
    """One pass over the pending keys, and what it leaves behind when it stops early."""

    services: RunServices
    pending: list[RunKey]
    store: ResultStore
    transcripts: TranscriptWriter
    concurrency: int
    quiet: bool
    console: Console
    stop_message: Callable[[], str]
    sandbox: Future[None]
    stopped_by: int = signal.SIGINT  # the first stop signal, once one came

    def run(self, out: Path, created: bool) -> LoopStats:
        """Execute the pending keys; whatever stops the sweep, the store and transcripts are closed first."""
        discard = finished = False
        try:
            stats = asyncio.run(self._execute())
            finished = True
            return stats
        except SandboxError:
            # The pool cannot start: leave no directory behind that the fixed command would have to resume, unless
            # runs that needed no code already put results in it.
            discard = created and self.store.path.stat().st_size == 0
            raise
        except KeyboardInterrupt:
            self.console.print(f"interrupted: {self.stop_message()}", markup=False, highlight=False)
            raise
        except EndpointUnreachable as exc:
            hint = f"is the server up and the address right ({self.services.model.identity})?"
            raise EndpointUnreachable(f"{exc}; {hint} {self.stop_message()}") from None
        finally:
            if not finished:  # nothing waits for the runs in flight any more: their code must not run on
                shutdown_sandboxes()
            self.store.close()
            # runs that never got a result line (a stop, a refused endpoint) keep their records
            self.transcripts.close()
            if discard:
                shutil.rmtree(out, ignore_errors=True)

    async def _execute(self) -> LoopStats:
        """The sweep on the event loop, stopped with the pool's own error when the sandbox cannot start, or at once
        (runs in flight dropped, their processes killed) by SIGTERM or SIGHUP."""
        stop = asyncio.Event()
        signals = _StopSignals(stop, self.console, self.stop_message)
        try:
            if not self.pending:
                return LoopStats()
            sweep = asyncio.ensure_future(
                run_keys(
                    self.pending,
                    self._execute_run,
                    self.store,
                    concurrency=self.concurrency,
                    quiet=self.quiet,
                    console=self.console,
                    stop=stop,
                    waiting_for=waiting_for(self.services.model),
                )
            )
            starting = asyncio.wrap_future(self.sandbox)
            if not await _until_halted(sweep, starting, signals.halted):
                starting.cancel()  # its outcome no longer matters
                shutdown_sandboxes()  # first: no model code runs a moment longer
                sweep.cancel()  # before the loop hands any run the end of its killed child
                await asyncio.gather(sweep, return_exceptions=True)  # the finished runs' lines reach the disk
                return LoopStats(interrupted=True)
            if starting.done() and starting.exception() is not None:
                sweep.cancel()
                await asyncio.gather(sweep, return_exceptions=True)
                starting.result()  # the pool's own error
            stats = await sweep
            stats.interrupted = stop.is_set() and stats.done < len(self.pending)
            return stats
        finally:
            self.stopped_by = signals.first or signal.SIGINT
            signals.remove()
            await self.services.model.aclose()
            self.services.close()

    async def _execute_run(self, key: RunKey) -> RunResult | None:
        """The run's result; None for a run that waits for a batch (its records so far are dropped: the pass that
        gets its answers records the run whole)."""
        try:
            return await execute_run(self.services, key)
        except RequestDeferred:
            self.transcripts.discard_run(key.file_stem)
            return None


async def _until_halted(
    sweep: asyncio.Future[LoopStats], starting: asyncio.Future[None], halted: asyncio.Event
) -> bool:
    """Wait until the sweep is over (False if `halted` came first): it failed, the pool failed to start, or both
    are done."""
    halt = asyncio.ensure_future(halted.wait())
    try:
        while not halted.is_set():
            failed = [job for job in (sweep, starting) if job.done() and job.exception() is not None]
            if failed or (sweep.done() and starting.done()):
                return True
            waiting = [job for job in (sweep, starting, halt) if not job.done()]
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        return False
    finally:
        halt.cancel()


def waiting_for(model: ChatModel) -> Callable[[], str]:
    """What a sweep's first runs wait for, for the progress to say until one finishes: the embedded model loads its
    weights, then answers the first requests on the CPU (a minute or more on two cores); others answer over HTTP."""
    inner = getattr(model, "inner", model)  # under the response cache
    if isinstance(inner, LocalChatModel):
        return lambda: "model working on the first requests…" if inner.loaded else "loading model…"
    return lambda: "waiting for the first answers…"


SHOW_CURSOR = "\x1b[?25h"  # the terminal's cursor, which a live progress bar hides while it is drawn

# The signals that stop a sweep: Ctrl-C, a process manager's SIGTERM (systemd, Kubernetes, CI, `timeout`), and the
# SIGHUP of a closed terminal.
_STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def stop_status(signum: int) -> int:
    """What edsb exits with when `signum` stopped it: 128 + its number, as a shell reports a process that signal
    ended (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP)."""
    return 128 + int(signum)


class _StopSignals:
    """First Ctrl-C: start no new run and let the ones in flight finish (their results are kept). First SIGTERM or
    SIGHUP: stop now (`halted`): the runs in flight are dropped and their processes killed, every finished run is
    kept. Any second signal: kill every sandbox process and exit at once. Every result counted so far is already on
    disk, so any of them loses only the runs in flight, and the next pass redoes them."""

    def __init__(self, stop: asyncio.Event, console: Console, stop_message: Callable[[], str]) -> None:
        self.stop, self.console, self.stop_message = stop, console, stop_message
        self.halted = asyncio.Event()
        self.first: int | None = None
        self._loop = asyncio.get_running_loop()
        self._installed: list[int] = []
        self._previous: dict[int, Any] = {}
        for signum in _STOP_SIGNALS:
            # No loop signal handlers on Windows or off the main thread: Ctrl-C then interrupts at once.
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                self._loop.add_signal_handler(signum, self._on_first, signum)
                self._installed.append(signum)

    def _on_first(self, signum: int) -> None:
        """On the loop: stop the sweep as `signum` asks, and let a second signal stop edsb itself."""
        self.first = signum
        self.stop.set()
        for other in self._installed:
            self._loop.remove_signal_handler(other)
            self._previous[other] = signal.signal(other, self._on_second)
        self._installed = []
        if signum == signal.SIGINT:
            self._say("finishing in-flight requests; Ctrl-C again to stop now")
        else:
            self._say(f"{signal.Signals(signum).name}: stopping; the runs in flight are redone by the next pass")
            self.halted.set()

    def _on_second(self, signum: int, frame: object) -> None:
        """In the main thread, wherever it was (so no lock is taken): the sandbox processes first, then exit, whatever
        fails on the way (the processes left would still die with edsb, by their parent-death signal)."""
        try:
            kill_sandboxes_now()
            closed = end_progress_now()  # the bar stays above the last line, not below it
            for stream in (sys.stdout, self.console.file):
                with contextlib.suppress(Exception):  # the interrupted code may have been writing to it
                    stream.flush()
            self._say_at_once(f"stopped: {self.stop_message()}", below_the_bar=not closed)
        finally:
            os._exit(stop_status(signum))

    def _say(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False)

    def _say_at_once(self, line: str, below_the_bar: bool = False) -> None:
        """`_say` from a signal handler: straight to the console's file descriptor, past rich's locks and the
        file's buffer, which the interrupted code may hold (the first Ctrl-C's line may still be on its way).
        `below_the_bar`: the bar could not be closed, so the line starts a line of its own and shows the cursor."""
        if below_the_bar and self.console.is_terminal:
            line = f"\n{SHOW_CURSOR}{line}"
        try:
            fd = self.console.file.fileno()
        except (AttributeError, OSError, ValueError):  # not a file of the system's (a test's buffer)
            self.console.file.write(line + "\n")
            return
        os.write(fd, (line + "\n").encode())

    def remove(self) -> None:
        """The handlers as they were before the sweep."""
        for signum in self._installed:
            self._loop.remove_signal_handler(signum)
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
