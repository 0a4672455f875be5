"""Size and build time of `edsb report --format html` for a full Table 1 run (1,800 runs).

Writes a synthetic run directory shaped like `edsb run --preset table1`: every key of the preset, the real prompts
edsb would send (Narrator and Event Parser requests built from the data), short replies, and a mix of passed,
failed and errored runs with plans. Then times the report and prints the page size and the time spent.
Usage: `EDSB_DATA=... python benchmarks/bench_html_report.py`.
"""

from __future__ import annotations

import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from edsb.data.benchmark import Benchmark
from edsb.data.selection import select_cases
from edsb.llm.protocol import ChatRequest, ChatResponse, Message
from edsb.llm.transcripts import TranscriptRecord, TranscriptWriter
from edsb.planning.messages import narrator_request, parser_request
from edsb.planning.narrator import NarratorEvent
from edsb.planning.prompt_pack import load_prompt_pack
from edsb.planning.scenario import build_scenario
from edsb.planning.variants import get_preset
from edsb.report.html import write_html_report
from edsb.runner.keys import expand_keys

CODE = "```python\ndef parse_event():\n    david = get_character('David')\n    david.sit_on('chair_3')\n```"


def write_run(benchmark: Benchmark, out: Path) -> int:
    preset = get_preset("table1")
    keys = expand_keys(
        preset.variants, select_cases(preset.cases, benchmark.cases), preset.levels, preset.repeats, benchmark.cases
    )
    pack = load_prompt_pack(benchmark)
    writer = TranscriptWriter(out / "transcripts")
    now = datetime.now(UTC)
    lines = []
    for number, key in enumerate(keys):
        case = benchmark.case(key.case)
        scenario = build_scenario(benchmark, case, key.distraction, key.repeat, key.variant)
        name = case.expected_plans[0].character
        requests = [narrator_request(scenario, pack)]
        if scenario.variant.parser is not None:
            requests.append(parser_request(scenario, pack, NarratorEvent((name,), "sits down for a while")))
        for request in requests:
            chat = ChatRequest(messages=tuple(Message(**m) for m in request.messages), temperature=0.1)
            reply = CODE if request.module != "narrator" else json.dumps({"characters": [name], "activity": "sit"})
            response = ChatResponse(
                text=reply, prompt_tokens=3000, completion_tokens=80, latency_s=1.0, model="m", finish_reason="stop"
            )
            record = TranscriptRecord(
                key=f"{number}", run=key.id.replace("/", "__"), module=request.module, model="m", request=chat,
                response=response, started_at=now, finished_at=now,
            )  # fmt: skip
            writer.record(record)
        status = ("passed", "failed", "failed", "error")[number % 4]
        lines.append(
            {
                "key": key.id,
                "variant": key.variant,
                "case": key.case,
                "distraction": key.distraction,
                "repeat": key.repeat,
                "tags": list(case.tags),
                "status": status,
                "passed": status == "passed",
                "error_kind": "code_runtime" if status == "error" else None,
                "error": "code_runtime: NameError: name 'x' is not defined" if status == "error" else None,
                "reason": f"{name}: relationships ['sit on chair_3'] do not satisfy ..."
                if status == "failed"
                else None,
                "plan": None
                if status == "error"
                else {name: {"target_action": ["sit"], "relationships": ["sit on chair_3"]}},
                "prompt_tokens": 6000,
                "completion_tokens": 160,
            }
        )
    writer.close()
    (out / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (out / "config.json").write_text(json.dumps({"model": "synthetic", "variants": list(preset.variants)}))
    return len(keys)


def main() -> None:
    benchmark = Benchmark.open(None)
    with tempfile.TemporaryDirectory() as directory:
        run = Path(directory) / "run"
        run.mkdir()
        started = time.perf_counter()
        runs = write_run(benchmark, run)
        transcripts = sum(p.stat().st_size for p in (run / "transcripts").iterdir())
        print(f"synthetic Table 1 run: {runs} runs, transcripts {transcripts / 1e6:.1f} MB "
              f"(written in {time.perf_counter() - started:.1f} s)")  # fmt: skip
        started = time.perf_counter()
        page = write_html_report(run, Path(directory) / "report.html", benchmark)
        elapsed = time.perf_counter() - started
        print(f"report.html: {page.stat().st_size / 1e6:.2f} MB, built in {elapsed:.1f} s")


if __name__ == "__main__":
    main()
