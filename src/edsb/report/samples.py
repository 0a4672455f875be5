"""The sample log (`edsb report RUN --format samples`): one self-contained JSON line per run, as lm-eval's
`--log_samples` gives. Transcripts store each message text once under its content address; here every line carries
its texts whole, so `jq` reads a sample with no other file: the run key, every request's messages and the reply, the
code the sandbox ran, the event, the plan, and the verdict with its reason or error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

from edsb.errors import UsageError
from edsb.llm.transcripts import TranscriptRecord, transcripts_by_run
from edsb.planning.generation import REQUEST_SETTINGS
from edsb.planning.variants import get_variant
from edsb.report.formats import variant_rank
from edsb.results import RunResult
from edsb.results.rundir import RunDirectory
from edsb.sandbox import extract_code

SAMPLE_FORMAT: Final = "edsb.sample/1"


def executed_code(records: Sequence[TranscriptRecord], variant: str) -> str | None:
    """The code the sandbox ran: the code block of the Event Parser's last reply, or the Narrator's for w/o Event
    (whose Narrator writes the plan code). None when no such reply exists (the Narrator waited, or the run failed
    before)."""
    try:
        code_module = "narrator" if get_variant(variant).parser is None else "event_parser"
    except UsageError:  # a variant this edsb does not know: show no code rather than guess
        return None
    for record in reversed(records):
        if record.module == code_module and record.response is not None:
            return extract_code(record.response.text)
    return None


def _exchange(record: TranscriptRecord) -> dict[str, Any]:
    request, response, error = record.request, record.response, record.error
    return {
        "module": record.module,
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        "settings": request.model_dump(include=set(REQUEST_SETTINGS)),
        "sent": response.sent if response is not None else None,
        "reply": response.text if response is not None else None,
        "reasoning": response.reasoning if response is not None else None,
        "refusal": response.refusal if response is not None else None,
        "finish_reason": response.finish_reason if response is not None else None,
        "prompt_tokens": response.prompt_tokens if response is not None else None,
        "completion_tokens": response.completion_tokens if response is not None else None,
        "reasoning_tokens": response.reasoning_tokens if response is not None else None,
        "model": response.model if response is not None else record.model,
        "source": response.source if response is not None else None,
        "error": f"{error.kind}: {error.message}" if error is not None else None,
        "started_at": record.started_at.isoformat(),
        "finished_at": record.finished_at.isoformat(),
    }


def sample(result: RunResult, records: Sequence[TranscriptRecord]) -> dict[str, Any]:
    """One run as a self-contained line: its key, the requests in the order it sent them, the code, the plan and
    the verdict."""
    return {
        "format": SAMPLE_FORMAT,
        "key": result.key,
        "variant": result.variant,
        "case": result.case,
        "distraction": result.distraction,
        "repeat": result.repeat,
        "scene": result.scene,
        "tags": result.tags,
        "model": result.model,
        "status": str(result.status),
        "passed": result.passed,
        "error_kind": str(result.error_kind) if result.error_kind else None,
        "error": result.error,
        "reason": result.reason,
        "sampler_miss": result.sampler_miss,
        "exchanges": [_exchange(record) for record in records],
        "event": result.event,
        "code": executed_code(records, result.variant),
        "plan": result.plan,
        "tokens": result.tokens,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "latency_s": result.latency_s,
        "wall_s": result.wall_s,
        "truncated": result.truncated,
        "surrogates_replaced": result.surrogates_replaced,
    }


def samples(run_dir: Path) -> Iterator[dict[str, Any]]:
    """Every run of the directory (incomplete ones too), variants in the paper's order, then case, level and
    repeat."""
    run = RunDirectory.open(run_dir)
    transcripts = transcripts_by_run(run_dir)
    for result in sorted(run.results, key=lambda r: (variant_rank(r.variant), r.case, r.distraction, r.repeat)):
        yield sample(result, transcripts.get(result.run_key.file_stem, []))


def write_samples(run_dir: Path, stream: TextIO) -> int:
    """Write the sample log, one JSON line per run; returns how many lines were written."""
    count = 0
    for line in samples(run_dir):
        stream.write(json.dumps(line) + "\n")
        count += 1
    return count
