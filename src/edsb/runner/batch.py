"""`edsb run --batch`: the same sweep, its requests sent through the provider's batch API at half price.

Built on the response cache. Each pass runs the pipeline unchanged over the runs the directory does not hold yet; a
request the cache cannot answer goes into the pass's batch (named by its cache key) and its run waits, unrecorded.
Pass 1 sends every first request (Narrator, or the Event Parser of w/o Event), pass 2 the Event Parser requests the
stored events make, and the last pass is all cache hits: code, sampler and judge run as in a synchronous run, on the
very same answers, so the verdicts are a synchronous run's.

Resume: each batch's record (`results.batches`) is written, fsynced, before the batch is created, then with the
provider's id. A later invocation first polls every recorded batch that is not collected and stores its answers, so
no request still in flight is sent twice; a record whose id never came back is looked up by its tag where the API
keeps one. `--detach` submits and exits; the same command collects.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from edsb.errors import EdsbError, UsageError
from edsb.llm import ChatModel, RetryPolicy, build_model
from edsb.llm.batch import (
    BatchFailure,
    BatchRoute,
    BatchStatus,
    LineSplitter,
    Outcome,
    RequestDeferred,
    batch_route,
    export_route,
    gathered,
    json_entry,
    line_digest,
)
from edsb.llm.batch.openai import OpenAIBatch
from edsb.llm.cache import CachedChatModel, ResponseCache
from edsb.llm.factory import CHECK_REQUEST, check_model_async
from edsb.llm.protocol import ChatRequest, ChatResponse
from edsb.llm.retry import is_retryable_status
from edsb.planning.generation import chat_request
from edsb.results.batches import (
    BatchRecord,
    BatchTokens,
    batches_dir,
    collected,
    new_tag,
    read_batches,
    submitted,
    write_batch,
)
from edsb.results.rundir import RunDirLock
from edsb.runner.config import RunConfig
from edsb.runner.run import RunOutcome, run_benchmark, stop_status

POLL_BLIPS = 3  # passing failures in a row of a look at the batches before edsb stops (with one line)
Cost = Callable[[BatchTokens], float | None]  # USD at batch prices of a batch's tokens (None: no price known)


@dataclass
class BatchLedger:
    """What this invocation knows of the directory's batches: the answers that failed (by cache key) and how often
    each failed in this invocation (`tries`), so an expired request is resent a bounded number of times."""

    failures: dict[str, BatchFailure] = field(default_factory=dict)
    tries: dict[str, int] = field(default_factory=dict)

    def note(self, record: BatchRecord, counted: bool) -> None:
        for key, data in record.failures.items():
            failure = BatchFailure.model_validate(data)
            self.failures[key] = failure
            if counted and not failure.final:
                self.tries[key] = self.tries.get(key, 0) + 1


class DeferringModel:
    """The response cache's model, but a miss joins the pass's batch (`pending`) and its run waits
    (`RequestDeferred`). A request a batch refused raises what the synchronous client would have raised, so the
    pipeline records it as a synchronous run would; one that expired or failed `max_tries` times is left to the run
    as a transport failure (the run stays incomplete, for a later pass)."""

    def __init__(
        self, cached: CachedChatModel, ledger: BatchLedger, pending: dict[str, ChatRequest], max_tries: int
    ) -> None:
        self.cached, self.inner = cached, cached.inner
        self.ledger, self.pending, self.max_tries = ledger, pending, max_tries

    @property
    def identity(self) -> str:
        return self.inner.identity

    async def complete(self, request: ChatRequest) -> ChatResponse:
        key, stored = await self.cached.cached(request)
        if stored is not None:
            return stored
        failure = self.ledger.failures.get(key)
        if failure is not None and (failure.final or self.ledger.tries.get(key, 0) > self.max_tries):
            raise failure.to_error()
        self.pending[key] = request
        raise RequestDeferred(key)

    async def aclose(self) -> None:
        await self.cached.aclose()


@dataclass
class BatchSession:
    """One `edsb run --batch` invocation over one run directory."""

    config: RunConfig
    out: Path
    console: Console
    quiet: bool = False
    retry: RetryPolicy | None = None
    cost: Cost | None = None
    ledger: BatchLedger = field(default_factory=BatchLedger)
    probed: bool = False
    identity: str = ""  # the model's identity, part of every cache key (set by `run`)
    blips: int = 0  # passing poll failures in a row
    _lock: RunDirLock = field(init=False)

    def __post_init__(self) -> None:
        self._lock = RunDirLock(self.out)

    def run(self) -> RunOutcome | None:
        """The passes until every run is recorded; None when `--detach` left batches in flight (or `--batch-export`
        wrote its file)."""
        # 1. What cannot batch is refused before anything is sent or written.
        if not self.config.cache:
            raise UsageError("--batch keeps the answers in the response cache: drop --no-cache")
        model = self._client()
        offline = not self.config.batch  # --batch-export / --batch-import alone: files, no batch API
        route = export_route(model) if offline or self.config.invocation.batch_export else batch_route(model)
        self.identity = model.identity
        # 2. The directory is this process's (a new one is locked by its first pass, which makes it).
        try:
            self._hold()
            return self._passes(model, route, offline)
        finally:
            self._lock.release()

    def _hold(self) -> None:
        """The run directory's lock, from the moment it exists until this invocation ends: a second `edsb run` on it
        would poll, submit and store beside this one."""
        if self.out.is_dir():
            self._lock.acquire()

    def _passes(self, model: ChatModel, route: BatchRoute, offline: bool) -> RunOutcome | None:
        """Collect what earlier invocations left, then pass after pass until nothing waits for a batch."""
        # 1. The answers of an exported file, and the batches an earlier invocation left in flight, collected first.
        if self.config.invocation.batch_import:
            self._import(export_route(model), Path(self.config.invocation.batch_import).expanduser())
        if not self._settle(route):
            return None
        while True:
            # 2. One pass of the pipeline; the requests the cache cannot answer make the next batch.
            pending: dict[str, ChatRequest] = {}
            outcome = self._pass(pending)
            if outcome.interrupted or not pending:
                return outcome
            if self.config.invocation.batch_export or offline:
                self._export(route, pending)
                return None
            # 3. The batch: the refused setting first (one synchronous probe), then intent, create, id.
            self._probe()
            records = [self._submit(route, part) for part in _parts(route, pending)]
            if self.config.invocation.detach:
                ids = ", ".join(f"{record.number} ({record.batch_id})" for record in records)
                self._say(f"{len(pending)} requests submitted in batch {ids}; run the same command again to collect")
                return None
            if not self._settle(route):
                return None

    def _client(self) -> ChatModel:
        """A client of the run's model without the cache: its batch route and its identity (the cache's keys)."""
        config = self.config
        return build_model(
            config.model, base_url=config.base_url, api_key_env=config.api_key_env, timeout=config.timeout,
            max_retries=config.max_retries, cache=False, retry=self.retry, prompt_cache=config.prompt_cache,
        )  # fmt: skip

    def _pass(self, pending: dict[str, ChatRequest]) -> RunOutcome:
        def deferring(model: ChatModel) -> ChatModel:
            assert isinstance(model, CachedChatModel)
            self._hold()  # the pass has made the directory
            return DeferringModel(model, self.ledger, pending, self.config.batch_retries)

        return run_benchmark(self.config, self.out, quiet=self.quiet, console=self.console, retry=self.retry,
                             wrap=deferring)  # fmt: skip

    def _probe(self) -> None:
        """`check-model`'s request with the run's settings, sent once: a setting the endpoint refuses stops the sweep
        here, before a batch of requests that would all be refused."""
        if self.probed:
            return
        config = self.config
        request = chat_request(config.generation, CHECK_REQUEST.messages, json_mode=True)
        check = check_model_async(
            config.model, config.base_url, config.api_key_env, config.timeout, self.retry, request, config.prompt_cache
        )
        result = asyncio.run(check)
        if not result.get("ok"):
            fix = f"\nfix: {result['fix']}" if result.get("fix") else ""
            raise EdsbError(f"the model endpoint refused the run's settings: {result.get('error')}{fix}")
        self.probed = True

    def _submit(self, route: BatchRoute, pending: dict[str, ChatRequest]) -> BatchRecord:
        """1. the intent, durable; 2. the batch at the provider; 3. its id, durable."""
        number = len(read_batches(self.out)) + 1
        requests = {key: route.sent(request) for key, request in pending.items()}
        digests = {key: line_digest(route.line(key, request)) for key, request in pending.items()}
        record = BatchRecord(
            number=number, tag=new_tag(), provider=route.name, model=self.identity, requests=requests, digests=digests
        )
        write_batch(self.out, record)

        async def create() -> str:
            try:
                return await route.submit(pending, record.tag)
            except Exception as exc:
                raise _api_error(exc, "creating a batch") from exc
            finally:
                await route.aclose()

        record = submitted(record, asyncio.run(create()))
        write_batch(self.out, record)
        return record

    def _export(self, route: BatchRoute, pending: dict[str, ChatRequest]) -> None:
        """The pass's requests as OpenAI batch JSONL (vLLM's `run-batch` input), recorded as an exported batch whose
        answers `--batch-import` collects; nothing is sent."""
        if not self.config.invocation.batch_export:
            raise UsageError(
                f"{len(pending)} requests still wait for an answer: write them with --batch-export FILE, or send "
                "them with --batch"
            )
        path = Path(self.config.invocation.batch_export).expanduser().resolve()
        number = len(read_batches(self.out)) + 1
        requests = {key: route.sent(request) for key, request in pending.items()}
        record = BatchRecord(number=number, tag=new_tag(), provider="export", model=self.identity, requests=requests)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as handle:
            for key, request in pending.items():
                handle.write(route.line(key, request))
        write_batch(self.out, record.model_copy(update={"stage": "exported", "batch_id": str(path)}))
        self._say(
            f"{len(pending)} requests written to {path} in OpenAI's batch format (nothing was sent); answer them "
            "(vLLM: run-batch), then run the same command with --batch-import OUTPUT.jsonl"
        )

    def _import(self, route: OpenAIBatch, path: Path) -> None:
        """The answers in an OpenAI batch output file (vLLM's `run-batch` output) to the exported requests they
        answer, stored as a collected batch's; a request the file does not answer goes into the next export."""
        exported = [record for record in read_batches(self.out) if record.stage == "exported"]
        if not exported:
            raise UsageError(f"--batch-import {path}: {self.out} has no exported requests waiting for answers")
        wanted = {key for record in exported for key in record.requests}
        try:
            entries = _import_entries(path, wanted)
        except OSError as exc:
            raise UsageError(f"--batch-import {path}: not a batch output file edsb can read ({exc})") from None
        if not entries:
            raise UsageError(
                f"--batch-import {path}: no line of it answers a request exported from {self.out}; give the output "
                "of the file --batch-export wrote"
            )
        asyncio.run(self._store_imported(route, exported, entries, path))

    async def _store_imported(
        self, route: OpenAIBatch, exported: list[BatchRecord], entries: list[tuple[str, dict[str, Any]]], path: Path
    ) -> None:
        cache = ResponseCache()
        try:
            for record in exported:
                missing = BatchFailure(kind="failed", message=f"not answered in {path}")
                sent = record.requests
                answers = [(key, route.read(entry, sent[key])) for key, entry in entries if key in sent]
                await self._store(cache, record, gathered(answers, sent, missing))
        finally:
            cache.close()

    def _settle(self, route: BatchRoute) -> bool:
        """Wait for every recorded batch that is not collected, and store what it answered; False if `--detach`
        leaves one in flight. A Ctrl-C here loses nothing: every batch in flight is on record."""
        try:
            return asyncio.run(self._settle_async(route))
        except KeyboardInterrupt:
            self._say(f"interrupted: the batches in flight are recorded in {self.out}; run the same command to collect")
            raise
        except BatchStopped as stop:
            stop.args = (f"{stop.name}: stopped; the batches in flight are recorded in {self.out}: run the same "
                         "command to collect them",)  # fmt: skip
            raise

    async def _settle_async(self, route: BatchRoute) -> bool:
        cache = ResponseCache()
        stop = _SignalStop()
        try:
            return await self._wait(route, cache)
        except asyncio.CancelledError:
            if stop.signum is None:
                raise
            raise BatchStopped(stop.signum) from None
        except EdsbError:
            raise
        except Exception as exc:
            raise _api_error(exc, "polling the batches") from exc
        finally:
            stop.remove()
            await route.aclose()
            cache.close()

    async def _wait(self, route: BatchRoute, cache: ResponseCache) -> bool:
        """1. what the records say; 2. the batches left at their intent, found or given up; 3. poll until each has
        ended, collecting it as it does."""
        records = read_batches(self.out)
        for record in records:
            self.ledger.note(record, counted=False)
        open_records = [await self._located(route, record) for record in records if record.stage != "collected"]
        open_records = [record for record in open_records if record.stage == "submitted"]
        while open_records:
            polled = {record.number: await self._poll(route, record) for record in open_records}
            statuses = {number: status for number, status in polled.items() if status is not None}
            self._progress([r for r in open_records if r.number in statuses], statuses)
            for record in [r for r in open_records if r.number in statuses and statuses[r.number].state == "ended"]:
                await self._collect(route, cache, record)
                open_records.remove(record)
            if open_records and self.config.invocation.detach:
                self._say(f"{len(open_records)} batch(es) still in flight; run the same command again to collect")
                return False
            if open_records:
                await asyncio.sleep(self.config.batch_poll_s)
        return True

    async def _poll(self, route: BatchRoute, record: BatchRecord) -> BatchStatus | None:
        """The batch's status, once it is known to be the one the record made: a record whose id (hand-edited, or
        another directory's) names a batch with another tag is never trusted with its answers. None: a passing
        failure (after the SDK's own retries), said and tried again at the next look, up to `POLL_BLIPS` in a row,
        so that one bad minute does not end a day's wait."""
        path = batches_dir(self.out) / record.path_name
        try:
            status = await route.poll(str(record.batch_id))
        except Exception as exc:
            error = _api_error(exc, f"polling batch {record.batch_id} of {path}")
            self.blips += 1
            if not _passing(exc) or self.blips > POLL_BLIPS:
                raise error from exc
            wait = self.config.batch_poll_s
            self._say(f"batch API failed polling batch {record.batch_id} ({_said(exc)}); looking again in {wait:g} s")
            return None
        self.blips = 0
        if status.tag is not None and status.tag != record.tag:
            raise EdsbError(
                f"{path}: batch {record.batch_id} at the provider is not the batch this record made (tag "
                f"{status.tag or 'none'}, not {record.tag}); restore the record or move it aside to resend its requests"
            )
        return status

    async def _located(self, route: BatchRoute, record: BatchRecord) -> BatchRecord:
        """A record left at its intent: the batch the provider made of it, if the API can find it by its tag; else
        nothing was created, and its requests go into the next batch."""
        if record.stage != "intent":
            return record
        found = await route.find(record.tag)
        if found is not None:
            record = submitted(record, found)
        else:
            failure = BatchFailure(kind="failed", message="not sent: edsb stopped before the provider named the batch")
            failures = {key: failure.model_dump() for key in record.requests}
            record = collected(record, failures, 0, BatchTokens())
        write_batch(self.out, record)
        return record

    async def _collect(self, route: BatchRoute, cache: ResponseCache, record: BatchRecord) -> None:
        """Store the batch's answers under their cache keys, then mark it collected (a kill in between collects it
        again: the first answer stored for a key wins, and downloading costs nothing)."""
        await self._store(cache, record, await route.collect(str(record.batch_id), record.requests, record.digests))

    async def _store(self, cache: ResponseCache, record: BatchRecord, outcomes: dict[str, Outcome]) -> None:
        tokens = BatchTokens()
        failures = {}
        for key, outcome in outcomes.items():
            if isinstance(outcome, BatchFailure):
                failures[key] = outcome.model_dump()
                continue
            await cache.store(key, self.identity, outcome)
            tokens.prompt += outcome.prompt_tokens
            tokens.completion += outcome.completion_tokens
            tokens.cached += outcome.cached_tokens or 0
            tokens.cache_write += outcome.cache_write_tokens or 0
        record = collected(record, failures, len(outcomes) - len(failures), tokens)
        write_batch(self.out, record)
        self.ledger.note(record, counted=True)

    def _progress(self, open_records: list[BatchRecord], statuses: dict[int, BatchStatus]) -> None:
        """The pass, the oldest batch's age and the cost so far at batch prices, then one line per batch in flight
        with the provider's own state and counts: each line well inside 80 columns."""
        if self.quiet or not open_records:
            return
        oldest = min(datetime.fromisoformat(r.submitted_at or r.created_at) for r in open_records)
        age = _clock((datetime.now(UTC) - oldest).total_seconds())
        cost = self._cost_so_far(read_batches(self.out))  # the collected ones so far, this pass's too
        lines = [f"pass {max(r.number for r in open_records)} | oldest batch {age} | {cost}"]
        for record in open_records:
            status = statuses[record.number]
            total = status.total or len(record.requests)
            lines.append(
                f"  batch {record.number} {status.provider_status}: {status.succeeded:,}/{total:,} answered, "
                f"{status.failed:,} failed"
            )
        self._say("\n".join(lines))

    def _cost_so_far(self, records: list[BatchRecord]) -> str:
        if self.cost is None:
            return "cost: no price known"
        costs = [self.cost(record.tokens) for record in records if record.stage == "collected"]
        if any(cost is None for cost in costs):
            return "cost: no price known"
        return f"${sum(cost or 0.0 for cost in costs):.2f} so far at batch prices"

    def _say(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False)


def _import_entries(path: Path, wanted: set[str]) -> list[tuple[str, dict[str, Any]]]:
    """The lines of an offline batch's output file that answer one of `wanted`, each line bounded as a reply."""
    entries: list[tuple[str, dict[str, Any]]] = []
    lines = LineSplitter()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            for entry in map(json_entry, lines.feed(chunk)):
                if entry is not None and entry.get("custom_id") in wanted:
                    entries.append((str(entry["custom_id"]), entry))
    entries += [(str(e["custom_id"]), e) for e in map(json_entry, lines.end()) if e and e.get("custom_id") in wanted]
    return entries


def _parts(route: BatchRoute, pending: dict[str, ChatRequest]) -> list[dict[str, ChatRequest]]:
    """The pass's requests in batches within the API's limits (`BatchRoute.max_requests`, `max_bytes`), in order."""
    parts: list[dict[str, ChatRequest]] = [{}]
    size = 0
    for key, request in pending.items():
        length = len(route.line(key, request))
        if parts[-1] and (len(parts[-1]) >= route.max_requests or size + length > route.max_bytes):
            parts.append({})
            size = 0
        parts[-1][key] = request
        size += length
    return parts


class BatchStopped(EdsbError):
    """SIGTERM or SIGHUP while edsb waits on the batches: it stops there, with the status a stopped sweep exits
    with (143, 129); every batch in flight is on record."""

    def __init__(self, signum: int) -> None:
        self.name = signal.Signals(signum).name
        super().__init__(f"{self.name}: stopped")
        self.exit_code = stop_status(signum)


class _SignalStop:
    """While edsb waits on the batches, SIGTERM or SIGHUP cancels the wait (`signum` says which): a cancellation
    every await gives way to, where an exception raised in the middle of an SDK call could be caught and retried."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._installed: list[int] = []
        for signum in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
                self._loop.add_signal_handler(signum, self._stop, signum)
                self._installed.append(signum)

    def _stop(self, signum: int) -> None:
        if self.signum is None and self._task is not None:
            self.signum = signum
            self._task.cancel()

    def remove(self) -> None:
        for signum in self._installed:
            self._loop.remove_signal_handler(signum)
        self._installed = []


def _api_error(exc: Exception, doing: str) -> EdsbError:
    """A failure of the batch API as one line: what was being done, the SDK's words, whether it is the setup's (a
    status the synchronous path would not retry: 401, 403, 404) or passing (a rate limit, a server error, the
    network, after the SDK's own retries), and that nothing is lost."""
    said = _said(exc)
    if not _passing(exc):
        status = _status(exc)
        return EdsbError(
            f"batch API refused {doing} (HTTP {status}: {said}); check the key, --model and --base-url; nothing is "
            "lost: run the same command once fixed"
        )
    return EdsbError(f"batch API failed {doing} ({said}); nothing is lost: run the same command again")


def _said(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__


def _status(exc: Exception) -> int | None:
    status = getattr(exc, "status_code", None)  # the openai and anthropic SDKs' status errors
    status = status if isinstance(status, int) else getattr(exc, "code", None)  # google-genai's
    return status if isinstance(status, int) else None


def _passing(exc: Exception) -> bool:
    """Whether a batch API failure may pass, as the synchronous path classes a status: a rate limit, a server error,
    the network; not a refusal of the setup (401, 403, 404)."""
    status = _status(exc)
    return status is None or not 400 <= status < 500 or is_retryable_status(status)


def _clock(seconds: float) -> str:
    minutes, whole = divmod(int(max(seconds, 0)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{whole:02d}"


def run_batched(
    config: RunConfig,
    out: Path,
    *,
    console: Console,
    quiet: bool = False,
    retry: RetryPolicy | None = None,
    cost: Cost | None = None,
) -> RunOutcome | None:
    """`edsb run --batch`: every run of `config` through the provider's batch API (see the module docstring)."""
    return BatchSession(config, out, console, quiet, retry, cost).run()
