"""The results document (`results.json`, `edsb report RUN --format json`): a run card that says how the numbers were
made, then every cell with its intervals, as an lm-eval or Inspect user expects of a results file.

The document is typed (the run card here, each variant's results by `summary_types`, the same models summary.json
and every report read), so its JSON Schema (`docs/results-schema.json`) is generated from the models and a test
checks both that the file is current and that real documents validate against it. The run card reads
config.json, the results and the transcripts: it never holds a secret (config.json names the key's variable, never
the key, and only the endpoint's host is kept of its URL).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from edsb import REFERENCE_COMMIT, REFERENCE_REPO, __version__
from edsb.data.benchmark import Benchmark
from edsb.data.manifest import manifest_text, verify_tree
from edsb.data.selection import select_cases
from edsb.errors import EdsbError
from edsb.llm.errors import ReplayError
from edsb.llm.rules import unsent_reasons
from edsb.llm.transcripts import TranscriptRecord, read_transcripts, transcripts_dir
from edsb.planning.generation import GENERATION_FIELDS, REQUEST_SETTINGS, GenerationSettings
from edsb.planning.variants import PRESETS
from edsb.report.formats import paper_order
from edsb.report.summary_types import RunSummary, VariantSummary
from edsb.results import RunResult, RunStatus
from edsb.results.batches import read_batches
from edsb.results.rundir import RESULTS_DOCUMENT_FILE, SUMMARY_FILE, ReportedConfig, write_json

RESULTS_FORMAT: Final = "edsb.results/1"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DataCard(_Strict):
    """The benchmark files the run used."""

    repository: str = Field(description="the official repository the files come from")
    commit: str = Field(description="the commit edsb pins the files at")
    manifest_sha256: str = Field(
        description="sha256 of the pinned manifest (sha256sum format), the checksum every data file is verified against"
    )
    path: str | None = Field(description="the data directory the run read (None: not recorded)")
    files_match_manifest: bool | None = Field(
        description="whether every file of that directory matched the manifest when this document was written "
        "(None: the directory is not there)"
    )


class ModelCard(_Strict):
    """The model asked, and where it was served."""

    name: str = Field(description="--model as given: local, openai:<model>, replay:<dir>, oracle, ...")
    endpoint_host: str | None = Field(
        description="host[:port] of --base-url, nothing else of the URL; without one, the host the transcripts' "
        "model identity names (a provider's default endpoint, $OPENAI_BASE_URL) (None: no endpoint: an embedded "
        "or built-in model, or no transcripts)"
    )
    identities: list[str] = Field(description="the model identities the results record, as the server reported them")


class SentSettings(_Strict):
    """One combination of settings the requests were sent with, from the transcripts."""

    module: str = Field(description="narrator or event_parser")
    temperature: float | None = Field(description="the temperature asked for (None: not sent, the provider's own)")
    max_tokens: int | None = Field(description="the reply's token cap asked for (None: not sent, the server's default)")
    top_p: float | None
    seed: int | None = Field(description="the model's sampling seed sent (None: not sent)")
    json_mode: bool
    reasoning_effort: str | None = Field(default=None, description="the reasoning effort asked for (None: not sent)")
    thinking_budget: int | None = Field(default=None, description="the thinking tokens asked for (None: not sent)")
    thinking_level: str | None = Field(default=None, description="Gemini 3's thinking level (None: not sent)")
    wire: dict[str, Any] = Field(
        default_factory=dict,
        description="the generation settings as they went over the wire, under the API's own names "
        "(e.g. max_completion_tokens); a setting absent here was not sent (empty: not recorded)",
    )
    requests: int = Field(description="how many requests were sent with these settings")


class Sampling(_Strict):
    """The generation settings of the run (config.json), why a setting was not sent, and what the transcripts show
    was sent."""

    temperature: float | None = Field(description="None: not sent (`--temperature default`, or an API without one)")
    max_tokens: int | None = Field(description="--max-tokens, when the run recorded one")
    model_seed: int | None = Field(description="--model-seed, when the run recorded one")
    reasoning_effort: str | None = Field(default=None, description="--reasoning-effort (None: not sent)")
    thinking_budget: int | None = Field(default=None, description="--thinking-budget (None: not sent)")
    thinking_level: str | None = Field(default=None, description="--thinking-level (None: not sent)")
    json_mode: bool = Field(default=True, description="JSON mode on the Narrator (false: --no-json-mode)")
    prompt_cache: bool = Field(
        default=False,
        description="the shared system prompt and examples marked for the provider's prompt cache where its API "
        "takes markers (Anthropic; false: --no-prompt-cache, or an edsb before the option, which marked nothing)",
    )
    not_sent: dict[str, str] = Field(
        default_factory=dict,
        description="setting (temperature, json_mode, reasoning) -> why it was not sent; `reasoning` says when the "
        "provider's default effort applied",
    )
    sent: list[SentSettings]


class BatchCard(_Strict):
    """How the requests travelled when the run went through the provider's batch API (`edsb run --batch`)."""

    provider: str = Field(description="the batch API: openai (also Azure and the Responses API), anthropic, google")
    batch_ids: list[str] = Field(description="the provider's id of every batch the run sent, in order")
    requests: int = Field(description="requests sent by batch (a resent one counts again)")
    prices: Literal["batch", "list"] = Field(
        description="the prices of the cost estimate: `batch` when the last pass went by batch (config.json's "
        "`batch`), else the list prices"
    )
    prompt_cache_ttl: str | None = Field(
        default=None, description="the TTL of the prompt-cache marks in batched requests (Anthropic: 1h)"
    )


class Counts(_Strict):
    """How many runs the directory holds, by outcome."""

    planned: int | None = Field(description="runs the last `edsb run` planned (None: not recorded)")
    runs: int = Field(description="runs with a result line (the last line per run key)")
    judged: int = Field(description="runs counted in the rates: passed + failed + errors")
    passed: int
    failed: int
    errors: int = Field(description="execution errors: they count against both rates")
    incomplete: int = Field(description="runs with no verdict yet (retried on resume; not counted)")


class RunCard(_Strict):
    """How the numbers were made."""

    name: str = Field(description="the run directory's name")
    edsb_version: str | None = Field(description="the edsb version that made the run (None: not recorded)")
    written_by: str = Field(description="the edsb version that wrote this document")
    data: DataCard
    model: ModelCard
    sampling: Sampling
    variants: list[str] = Field(description="the variants asked for, in the paper's order")
    preset: str | None = Field(description="the preset whose grid the directory covers exactly (None: no preset's)")
    cases: list[int]
    distraction: list[int] = Field(description="the distraction levels asked for")
    repeats: int | None
    sampler: str = Field(description="the PI position sampler: reference (the paper's annealer) or optimal")
    sandbox: str = Field(description="the sandbox that ran the model's code")
    perturb: int = Field(description="the perturbation seed (0: the benchmark as published)")
    seed: int | None = Field(description="the position sampler's seed")
    limits: dict[str, float | int] = Field(description="the limits that decide verdicts (code time and memory, plans)")
    started_at: datetime | None = Field(description="the first request's start, from the transcripts (UTC)")
    finished_at: datetime | None = Field(description="the last request's end, from the transcripts (UTC)")
    counts: Counts
    batch: BatchCard | None = Field(default=None, description="the batches the run went by (absent: none)")


class ResultsDocument(_Strict):
    """`results.json`: the run card, then the results of every variant."""

    format: Literal["edsb.results/1"]
    run: RunCard
    perturbation: str | None = Field(description="`perturbed (seed N)` for the robustness suite, else None")
    notes: list[str] = Field(description="what the reader should know: a torn last line left out, ...")
    variants: dict[str, VariantSummary]


def endpoint_host(base_url: str | None) -> str | None:
    """host[:port] of a URL: never its credentials, path or query (where a key might hide)."""
    if not base_url:
        return None
    parts = urlsplit(base_url if "//" in base_url else f"//{base_url}")
    if not parts.hostname:
        return None
    return parts.hostname + (f":{parts.port}" if parts.port else "")


def identity_host(identity: str) -> str | None:
    """host[:port] of the endpoint a model identity names (`provider:model@url`, the URL as the client resolved it:
    a provider's default host when no --base-url was given); None for an identity with no URL (`local:...`,
    `oracle`). The URL starts at the last `@` before its `://` (a model's name may hold an `@` itself)."""
    scheme = identity.find("://")
    at = identity.rfind("@", 0, scheme) if scheme >= 0 else -1
    return endpoint_host(identity[at + 1 :]) if at >= 0 else None


def _endpoint_host(base_url: str | None, records: Iterable[TranscriptRecord]) -> str | None:
    """The host of --base-url, else the one host every transcript's model identity names (None when they name
    none, or several)."""
    if base_url:
        return endpoint_host(base_url)
    hosts = {identity_host(record.model) for record in records}
    return hosts.pop() if len(hosts) == 1 else None


def _data_card(path: str | None) -> DataCard:
    matches: bool | None = None
    if path is not None and Path(path).is_dir():
        matches = not verify_tree(Path(path))
    return DataCard(
        repository=REFERENCE_REPO,
        commit=REFERENCE_COMMIT,
        manifest_sha256=hashlib.sha256(manifest_text().encode("utf-8")).hexdigest(),
        path=path,
        files_match_manifest=matches,
    )


def _preset(config: ReportedConfig) -> str | None:
    """The preset recorded in config.json, else the one whose grid the selection is exactly (found through the
    data, since a preset names its cases by tag)."""
    recorded = (config.model_extra or {}).get("preset")
    if isinstance(recorded, str):
        return recorded
    for preset in PRESETS.values():
        grid = (set(preset.variants), list(preset.levels), preset.repeats)
        if grid != (set(config.variants), sorted(config.distraction), config.repeats):
            continue
        try:
            if select_cases(preset.cases, Benchmark.open(config.data).cases) == sorted(config.cases):
                return preset.name
        except EdsbError:  # the data is not there any more: the preset cannot be told
            return None
    return None


def _sent(records: Iterable[TranscriptRecord]) -> list[SentSettings]:
    counts: Counter[tuple[Any, ...]] = Counter()
    wire: dict[tuple[Any, ...], dict[str, Any]] = {}
    for record in records:
        asked = record.request.model_dump(include=set(REQUEST_SETTINGS))
        sent = record.response.sent if record.response is not None else {}
        key = (
            record.module,
            *(asked[name] for name in REQUEST_SETTINGS),
            json.dumps(sent, sort_keys=True, default=str),
        )
        counts[key] += 1
        wire[key] = sent
    return [
        SentSettings(module=key[0], **dict(zip(REQUEST_SETTINGS, key[1:-1], strict=True)), wire=wire[key], requests=n)
        for key, n in sorted(counts.items(), key=lambda item: str(item[0]))
    ]


def _sampling(config: ReportedConfig, records: list[TranscriptRecord]) -> Sampling:
    """The run's generation settings as config.json records them (an older directory's missing ones read as what
    its version sent), and why each one the paper sends, or a reasoning control, was not sent."""
    extra = config.model_extra or {}
    recorded = {name: extra[name] for name in GENERATION_FIELDS if name in extra}
    try:
        settings = GenerationSettings.model_validate({**recorded, "temperature": config.temperature})
        reasons = unsent_reasons(config.model, settings) if config.model else {}
    except (ValidationError, EdsbError):  # a hand-edited config.json: the settings as they stand, no reasons
        settings, reasons = None, {}
    fields = settings.model_dump(mode="json") if settings is not None else {}
    return Sampling(
        temperature=config.temperature,
        max_tokens=recorded.get("max_tokens") if isinstance(recorded.get("max_tokens"), int) else None,
        model_seed=recorded.get("model_seed") if isinstance(recorded.get("model_seed"), int) else None,
        reasoning_effort=fields.get("reasoning_effort"),
        thinking_budget=fields.get("thinking_budget"),
        thinking_level=fields.get("thinking_level"),
        json_mode=fields.get("json_mode", True),
        prompt_cache=extra.get("prompt_cache") is True,
        not_sent=reasons,
        sent=_sent(records),
    )


COMPARED_SETTINGS = ("temperature", "reasoning_effort", "thinking_budget", "thinking_level", "json_mode")


def settings_note(names: Sequence[str], configs: Sequence[ReportedConfig]) -> str | None:
    """The warning `edsb compare` prints when runs were asked for with different generation settings (temperature,
    reasoning, JSON mode): their differences are then partly the settings'. None when every run shares them."""
    rows = [_sampling(config, []).model_dump(include=set(COMPARED_SETTINGS)) for config in configs]
    differing = [name for name in COMPARED_SETTINGS if len({repr(row[name]) for row in rows}) > 1]
    if not differing:
        return None

    def values(setting: str) -> str:
        shown = ("not sent" if row[setting] is None else row[setting] for row in rows)
        return ", ".join(f"{name} {value}" for name, value in zip(names, shown, strict=True))

    shown = "; ".join(f"{setting}: {values(setting)}" for setting in differing)
    return f"the runs were asked for with different generation settings ({shown}): differences are partly theirs"


def _counts(results: list[RunResult], planned: int | None) -> Counts:
    status = Counter(r.status for r in results)
    return Counts(
        planned=planned,
        runs=len(results),
        judged=sum(r.is_judged for r in results),
        passed=status[RunStatus.PASSED],
        failed=status[RunStatus.FAILED],
        errors=status[RunStatus.ERROR],
        incomplete=status[RunStatus.INCOMPLETE],
    )


def _planned(run_dir: Path) -> int | None:
    """The runs the last `edsb run` planned, as its summary.json recorded them."""
    try:
        planned = json.loads((run_dir / SUMMARY_FILE).read_text(encoding="utf-8"))["config"]["runs_planned"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return planned if isinstance(planned, int) else None


LIMIT_FIELDS = ("code_timeout", "code_memory_mb", "max_plan_characters", "max_plan_relationships",
                "max_plan_string_chars")  # fmt: skip


def read_records(run_dir: Path) -> tuple[list[TranscriptRecord], str | None]:
    """The transcripts of a run directory, or none and why: a damaged transcript costs the card its times and
    settings sent, never the document."""
    try:
        return read_transcripts(transcripts_dir(run_dir)), None
    except ReplayError as error:
        return [], f"the transcripts could not be read ({error}): no times or settings sent in the run card"


def run_card(
    run_dir: Path,
    config: ReportedConfig,
    results: list[RunResult],
    planned: int | None = None,
    records: list[TranscriptRecord] | None = None,
) -> RunCard:
    """The card of a run directory; `planned` defaults to what summary.json recorded, `records` to its transcripts."""
    run_dir = Path(run_dir)
    records = read_records(run_dir)[0] if records is None else records
    extra = config.model_extra or {}
    batch = _batch_card(run_dir, extra.get("batch") is True)
    card = RunCard(
        name=run_dir.resolve().name,
        edsb_version=config.edsb_version,
        written_by=__version__,
        data=_data_card(config.data),
        model=ModelCard(
            name=config.model,
            endpoint_host=_endpoint_host(config.base_url, records),
            identities=sorted({r.model for r in results if r.model}),
        ),
        sampling=_sampling(config, records),
        variants=paper_order(config.variants),
        preset=_preset(config),
        cases=sorted(config.cases),
        distraction=sorted(config.distraction),
        repeats=config.repeats,
        sampler=config.sampler,
        sandbox=config.sandbox,
        perturb=config.perturb,
        seed=config.seed,
        limits={name: extra[name] for name in LIMIT_FIELDS if isinstance(extra.get(name), int | float)},
        started_at=min((r.started_at for r in records), default=None),
        finished_at=max((r.finished_at for r in records), default=None),
        counts=_counts(results, _planned(run_dir) if planned is None else planned),
    )
    if batch is not None:  # set only then: a document without batches reads as before
        card.batch = batch
    return card


def _batch_card(run_dir: Path, batched: bool) -> BatchCard | None:
    records = [record for record in read_batches(run_dir) if record.batch_id]
    if not records:
        return None
    ttl = next((sent["cache_ttl"] for r in records for sent in r.requests.values() if "cache_ttl" in sent), None)
    return BatchCard(
        provider=records[-1].provider,
        batch_ids=[str(record.batch_id) for record in records],
        requests=sum(len(record.requests) for record in records),
        prices="batch" if batched else "list",
        prompt_cache_ttl=ttl,
    )


# The fields results.json has always listed first in a variant (before the summary was typed, they were the only
# typed ones): kept first, so that the file stays byte for byte what earlier versions wrote.
RESULTS_FIRST = ("runs", "incomplete", "incomplete_kinds", "success_rate", "execution_rate", "success_interval",
                 "execution_interval", "cells")  # fmt: skip


def results_document(
    run_dir: Path, config: ReportedConfig, results: list[RunResult], summary: RunSummary, **card: Any
) -> dict[str, Any]:
    """The results document as plain JSON data, checked against its own schema on the way out."""
    records, problem = read_records(Path(run_dir))
    document = ResultsDocument(
        format=RESULTS_FORMAT,
        run=run_card(run_dir, config, results, records=records, **card),
        perturbation=summary.perturbation,
        notes=[*summary.notes, *([problem] if problem else [])],
        variants=summary.variants,
    ).model_dump(mode="json", exclude_unset=True)
    for name, variant in document["variants"].items():
        document["variants"][name] = {**{key: variant[key] for key in RESULTS_FIRST if key in variant}, **variant}
    return document


def write_results_document(run_dir: Path, document: Mapping[str, Any]) -> Path:
    path = Path(run_dir) / RESULTS_DOCUMENT_FILE
    write_json(path, document)
    return path


def results_schema() -> dict[str, Any]:
    """The JSON Schema of the results document (what `docs/results-schema.json` holds)."""
    schema = ResultsDocument.model_json_schema(mode="serialization")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
