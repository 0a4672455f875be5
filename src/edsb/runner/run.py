"""`edsb run`: expand the configuration into run keys, resume what a directory already holds, execute the rest,
and write `summary.json`."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from edsb.data.benchmark import Benchmark
from edsb.errors import UsageError
from edsb.llm import RetryPolicy, TranscriptWriter, build_model, transcripts_dir
from edsb.planning.pipeline import RunServices, execute_run
from edsb.planning.sandbox import SandboxLimits, check_sandbox
from edsb.planning.variants import get_variant
from edsb.report.summary import build_summary
from edsb.runner.config import RunConfig, check_resume
from edsb.runner.keys import RunKey, expand_keys
from edsb.runner.loop import LoopStats, run_keys
from edsb.runner.store import ResultStore, load_results

SUMMARY_FILE = "summary.json"


@dataclass
class RunOutcome:
    out: Path
    keys: list[RunKey]
    skipped: int
    stats: LoopStats
    summary: dict[str, Any]


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
    try:
        out.mkdir(parents=True, exist_ok=True)
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
) -> RunOutcome:
    """Run every key of `config` that `out` does not hold yet, then summarise the whole directory.

    `retry` replaces the default backoff of remote models (`config.max_retries` then does not apply).
    """
    benchmark = Benchmark.open(config.data)
    for variant in config.variants:
        get_variant(variant)  # unknown names fail before anything is written
    keys = expand_keys(config.variants, config.cases, config.distraction, config.repeats, benchmark.cases)
    if not keys:
        raise UsageError("the selection contains no run (check --cases against --distraction: PI cases have level 0)")
    # Everything that can refuse the configuration (model spec, API key, replay directory, sandbox limits) is
    # checked before config.json is written, so a typo never leaves a run directory that blocks the fix.
    check_out_dir(out)
    created = not out.exists()
    prepare_out_dir(out)
    limits = SandboxLimits(timeout=config.code_timeout, memory_bytes=config.code_memory_mb << 20)
    try:
        check_sandbox(limits)
        model = build_model(
            config.model,
            base_url=config.base_url,
            api_key_env=config.api_key_env,
            timeout=config.timeout,
            max_retries=config.max_retries,
            max_in_flight=config.concurrency,
            cache=config.cache,
            retry=retry,
            data=benchmark.root,
        )
    except BaseException:
        if created:
            out.rmdir()
        raise
    check_resume(out, config)
    store = ResultStore(out)
    finished = store.open()
    pending = [key for key in keys if key.id not in finished]
    services = RunServices(
        benchmark=benchmark,
        model=model,
        temperature=config.temperature,
        seed=config.seed,
        limits=limits,
        transcripts=TranscriptWriter(transcripts_dir(out)),
    )
    try:
        stats = asyncio.run(_execute(services, pending, store, config.concurrency, quiet, console))
    except KeyboardInterrupt:
        kept = len(load_results(out))
        (console or Console(stderr=True)).print(
            f"interrupted: {kept} of {len(keys)} results kept in {out}; rerun the same command to resume",
            markup=False,
            highlight=False,
        )
        raise
    finally:
        store.close()
    wanted = {key.id for key in keys}
    records = [r for r in load_results(out) if r["key"] in wanted]
    summary = build_summary(records, config.variants)
    summary["config"] = {"model": config.model, "runs_planned": len(keys)}
    path = out / SUMMARY_FILE
    path.with_suffix(".tmp").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    path.with_suffix(".tmp").replace(path)
    return RunOutcome(out, keys, len(keys) - len(pending), stats, summary)


async def _execute(
    services: RunServices,
    pending: list[RunKey],
    store: ResultStore,
    concurrency: int,
    quiet: bool,
    console: Console | None,
) -> LoopStats:
    try:
        if not pending:
            return LoopStats()
        return await run_keys(
            pending,
            lambda key: execute_run(services, key),
            store,
            concurrency=concurrency,
            quiet=quiet,
            console=console,
        )
    finally:
        await services.model.aclose()
