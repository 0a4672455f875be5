"""Run directories in tests: reading what `edsb run` wrote straight from the files (not through edsb's own loaders,
which are under test), and writing small ones by hand for the commands that read them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS_FILE = "results.jsonl"  # the on-disk format a user relies on, spelled out rather than imported
TIMING_FIELDS = ("latency_s", "wall_s")


def raw_lines(run_dir: Path) -> list[bytes]:
    """results.jsonl as bytes, line endings kept (a torn last line shows); none when the file does not exist."""
    path = run_dir / RESULTS_FILE
    return path.read_bytes().splitlines(keepends=True) if path.exists() else []


def read_results(run_dir: Path) -> list[dict[str, Any]]:
    """Every record of results.jsonl, in file order."""
    return [json.loads(line) for line in (run_dir / RESULTS_FILE).read_text(encoding="utf-8").splitlines()]


def records_by_key(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Every line of results.jsonl, parsed; fails on a torn line or a key seen twice."""
    records: dict[str, dict[str, Any]] = {}
    for line in raw_lines(run_dir):
        assert line.endswith(b"\n"), f"torn line {line[:80]!r}"
        record = json.loads(line)
        assert record["key"] not in records, f"{record['key']} appears twice"
        records[record["key"]] = record
    return records


def content(record: dict[str, Any]) -> dict[str, Any]:
    """What a run produced, without the timings that vary from pass to pass."""
    return {name: value for name, value in record.items() if name not in TIMING_FIELDS}


def read_summary(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))


def transcript_records(run_dir: Path) -> list[dict[str, Any]]:
    """Every transcript record, messages with their texts, run by run in run-id order, each run's in written order."""
    lines = [json.loads(line) for line in (run_dir / "transcripts" / "requests.jsonl").read_text("utf-8").splitlines()]
    texts = {line["text_id"]: line["text"] for line in lines if "format" not in line}
    records = [line for line in lines if "format" in line]
    for record in records:
        record["request"]["messages"] = [
            {"role": m["role"], "content": texts[m["text_id"]]} for m in record["request"]["messages"]
        ]
    return sorted(records, key=lambda record: record["run"])


def every_output(run_dir: Path, *texts: str) -> str:
    """Everything a run wrote (every file under `run_dir`, recursively) plus the given texts (stdout, stderr)."""
    parts = list(texts)
    for path in sorted(run_dir.rglob("*")):
        if path.is_file():
            parts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


def result_record(
    variant: str, case: int, tags: list[str], level: int, repeat: int, status: str, **extra: Any
) -> dict[str, Any]:
    """One results.jsonl record as `edsb run` writes it, with fixed token counts; `extra` may set the error kind,
    the error message and the failure reason."""
    return {
        "key": f"{variant}/tc{case:02d}-d{level}-r{repeat}",
        "variant": variant,
        "case": case,
        "distraction": level,
        "repeat": repeat,
        "tags": tags,
        "status": status,
        "passed": status == "passed",
        "error_kind": extra.get("error_kind"),
        "error": extra.get("error"),
        "reason": extra.get("reason"),
        "prompt_tokens": 1000,
        "completion_tokens": 100,
        "tokens": {"narrator": {"prompt": 600, "completion": 60}, "event_parser": {"prompt": 400, "completion": 40}},
    }


def write_run_dir(path: Path, records: list[dict[str, Any]], model: str = "openai:gpt-4o-2024-08-06") -> Path:
    """A run directory holding just `records` and a config naming `model` (enough for report and compare)."""
    path.mkdir(parents=True)
    (path / RESULTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in records))
    (path / "config.json").write_text(json.dumps({"model": model, "variants": ["ours", "scene-graph"]}))
    return path
