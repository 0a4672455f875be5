"""`edsb run` and `edsb check-model`: their options are generated from the settings declaration."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from pydantic import ValidationError
from rich.console import Console

from edsb.cli.app import Command, app, err, print_error
from edsb.cli.options import declared_command
from edsb.errors import EdsbError, UsageError
from edsb.report.formats import ReportFormat, plural
from edsb.runner.config import config_default, run_overrides
from edsb.settings.declare import CHECK_MODEL, RUN
from edsb.settings.run import CheckModelSettings, RunSettings

if TYPE_CHECKING:
    from edsb.report.summary_types import RunSummary
    from edsb.runner.config import RunConfig
    from edsb.runner.run import RunOutcome


def _check_model(given: dict[str, Any]) -> None:
    """Send one tiny request with every generation setting a run would send, and print one JSON line: does this
    model answer, and accept those settings? Run it, with the options of the run, before a long sweep."""
    from edsb.llm import check_model, parse_model_spec
    from edsb.llm.factory import CHECK_REQUEST
    from edsb.planning.generation import chat_request
    from edsb.runner.config import resolve_generation

    options = run_overrides(given)
    model = options.pop("model") or config_default("model")
    parse_model_spec(model)  # a malformed --model is a usage error, not a model that fails to answer
    try:
        given_timeout = {"timeout": options["timeout"]} if options["timeout"] is not None else {}
        timeout = CheckModelSettings.model_validate(given_timeout).timeout
    except ValidationError as exc:
        raise UsageError(f"--timeout: {exc.errors()[0]['msg']}") from None
    generation = resolve_generation(model, {k: v for k, v in options.items() if v is not None})
    request = chat_request(generation, CHECK_REQUEST.messages, json_mode=True)
    result = check_model(
        model,
        base_url=options["base_url"],
        api_key_env=options["api_key_env"],
        timeout=timeout,
        request=request,
        prompt_cache=options["prompt_cache"] is not False,
    )
    sys.stdout.write(json.dumps(result) + "\n")
    if not result.get("ok"):
        fix = f"\nfix: {result['fix']}" if result.get("fix") else ""
        print_error(f"{result.get('error')}{fix}")
        raise typer.Exit(1)


def _run(given: dict[str, Any]) -> None:
    """Evaluate a model on the benchmark through the paper's framework; resumable, writes results and a summary."""
    from edsb.report.summary import write_summary
    from edsb.runner.config import default_out_dir, load_session_options, resolve_run_config

    # 1. The run's configuration: defaults < preset < config file < the options given here.
    config, out, quiet, offline = (given.pop(name) for name in ("config", "out", "quiet", "offline"))
    session = load_session_options(config) if config else {}
    notes: list[str] = []
    offline = offline or bool(session.get("offline"))
    resolved = resolve_run_config(run_overrides(given), config, fetch=True, offline=offline, notes=notes)
    for note in notes:
        err.print(f"note: {note}", markup=False, highlight=False)
    # 2. This invocation's own options: where to write, how loudly.
    out = out or (Path(session["out"]) if session.get("out") else None) or default_out_dir(resolved.model)
    # 3. The sweep (synchronous, or by batch), then its summary.
    outcome = _sweep(resolved, out, quiet=quiet or bool(session.get("quiet")))
    if outcome is None:  # detached, or exported: nothing to summarise yet
        return
    summary = write_summary(out, outcome.results, runs_planned=outcome.runs_planned)
    if outcome.interrupted:  # 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP
        raise typer.Exit(outcome.exit_status)
    # 4. The brief table and the closing lines; a sweep with holes exits non-zero.
    _close_run(summary, outcome, out)


def _sweep(resolved: RunConfig, out: Path, *, quiet: bool) -> RunOutcome | None:
    """The runs, synchronously or through the provider's batch API (`--batch`, `--batch-export`, `--batch-import`);
    None when `--detach` left batches in flight or `--batch-export` wrote its file."""
    from edsb.runner.run import run_benchmark

    invocation = resolved.invocation
    if invocation.detach and not resolved.batch:
        raise UsageError("--detach submits a batch and exits: it needs --batch")
    if not (resolved.batch or invocation.batch_export or invocation.batch_import):
        return run_benchmark(resolved, out, quiet=quiet, console=err)
    from edsb.report.cost import batch_cost
    from edsb.runner.batch import run_batched

    return run_batched(resolved, out, quiet=quiet, console=err, cost=batch_cost(resolved.model))


app.command("check-model", cls=Command)(declared_command(CHECK_MODEL, _check_model, RunSettings, CheckModelSettings))
app.command("run", cls=Command)(declared_command(RUN, _run, RunSettings))


def _close_run(summary: RunSummary, outcome: Any, out: Path) -> None:
    """The brief table, why runs failed (if they all did), the counts, and an error for incomplete runs."""
    from edsb.report.render import render_report

    render_report({}, summary, ReportFormat.TABLE, console=Console(soft_wrap=True), brief=True)
    hint = _why_runs_failed(summary, out)
    if hint:
        err.print(hint, markup=False, highlight=False)
    stats = outcome.stats
    err.print(
        f"{plural(len(outcome.keys), 'run')} planned, {outcome.skipped} already done, {stats.done} executed "
        f"({stats.incomplete} incomplete: rerun the same command to retry them); results in {out}",
        markup=False,
        highlight=False,
    )
    if stats.incomplete:  # a sweep with holes must not look like a finished one to a script or CI
        are = "is" if stats.incomplete == 1 else "are"
        why = "no answer from the model, or an edsb fault"
        raise EdsbError(f"{plural(stats.incomplete, 'run')} {are} incomplete ({why}); see {out}")


def _why_runs_failed(summary: RunSummary, out: Path) -> str | None:
    """One line under the table of a sweep with execution errors (their most frequent kinds) or without a single
    pass, since the brief table shows rates, not reasons; `edsb report` has the reasons."""
    kinds: Counter[str] = Counter()
    for data in summary.variants.values():
        kinds.update(data.error_kinds)
    if kinds:
        top = ", ".join(f"{kind} {count}" for kind, count in kinds.most_common(3))
        more = f" and {len(kinds) - 3} more kinds" if len(kinds) > 3 else ""
        return f"execution errors by kind: {top}{more}; `edsb report {out}` shows their reasons"
    rates = [data.success_rate for data in summary.variants.values()]
    if rates and all(rate == 0 for rate in rates):
        return f"no run passed; `edsb report {out}` lists why the plans failed"
    return None
