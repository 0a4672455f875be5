"""Driving the real `edsb run` (a subprocess of the installed package) against a scripted loopback model.

The Narrator is always answered with one valid event for case 13 ("David eats a sandwich sitting in the kitchen");
the Event Parser gets the next program of a script. Runs use the Object List variant: the same Narrator → Event
Parser → sandbox → judge pipeline as Ours, with a scene description that exists for any number of repeats (the
narrative ones stop at 5). With `--concurrency 1` the runs of one invocation happen in repeat order, so repeat `i`
executes program `i`; every program also names itself in a comment, which the tests read back from the transcripts
rather than trusting the order.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.openai_server import RecordedRequest, Reply

CASE = 13
VARIANT = "object-list"
NARRATOR_REPLY = json.dumps(
    {"event": {"characters": ["David"], "activity": "eat a sandwich sitting in the kitchen", "reasoning": "hungry"}}
)
MARKER = re.compile(r"^# program: (\S+)$", re.MULTILINE)

# The correct plan for case 13, written so that it also notices a run that inherited state from an earlier one: a
# global left behind, a rebound builtin, an API that answers differently. Any of those makes the plan wrong.
BENIGN_BODY = """\
intact = True
try:
    leaked
    intact = False
except NameError:
    pass
if len([1, 2]) != 2 or sorted([3, 1]) != [1, 3] or str(7) != '7' or type(1) is not int:
    intact = False
area = get_area_to_sit_on('chair_2')
if area.conditions != ['sit on chair_2'] or Area().conditions != []:
    intact = False
if not isinstance(get_objects_close_to('chair_2'), list):
    intact = False
david = get_character('David')
david.set_target_action('eat' if intact else 'idle')
david.set_position(area if intact else get_area_to_sit_on('chair_1'))
"""


def program(name: str, body: str) -> str:
    """An Event Parser reply: a python block whose `parse_event` holds `body`, labelled with `name`."""
    indented = "".join(f"    {line}\n" if line.strip() else "\n" for line in body.strip("\n").splitlines())
    return f"Here is the plan.\n```python\n# program: {name}\ndef parse_event():\n{indented}```\n"


def is_narrator_request(request: RecordedRequest) -> bool:
    return (request.json().get("response_format") or {}).get("type") == "json_object"


class ScriptedModel:
    """Answers Narrator requests with `NARRATOR_REPLY` and Event Parser requests with the script, in order."""

    def __init__(self, programs: Sequence[str], narrator_reply: str = NARRATOR_REPLY) -> None:
        self.programs = list(programs)
        self.narrator_reply = narrator_reply
        self._next = 0
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        if is_narrator_request(request):
            return Reply.completion(self.narrator_reply)
        with self._lock:
            index, self._next = self._next, self._next + 1
        if index >= len(self.programs):
            return Reply.error(500, f"the script has only {len(self.programs)} programs")
        return Reply.completion(self.programs[index])


@dataclass(frozen=True)
class EdsbResult:
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def edsb(args: Iterable[str], *, env: Mapping[str, str], cwd: Path, timeout: float = 300) -> EdsbResult:
    """`python -m edsb ARGS` in a child process; its whole environment is `env` on top of ours."""
    import time

    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-m", "edsb", *args],
        env={**os.environ, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return EdsbResult(completed.returncode, completed.stdout, completed.stderr, time.monotonic() - started)


def run_args(base_url: str, out: Path, repeats: int, *extra: str) -> list[str]:
    return [
        "run",
        "--model",
        "openai:scripted",
        "--base-url",
        base_url,
        "--variant",
        VARIANT,
        "--cases",
        str(CASE),
        "--distraction",
        "0",
        "--repeats",
        str(repeats),
        "--no-cache",
        "--quiet",
        "--out",
        str(out),
        *extra,
    ]


def results(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]


def programs_by_run(out: Path) -> dict[str, str]:
    """Run key → the name of the program its Event Parser answered with, read from the run's transcript."""
    names: dict[str, str] = {}
    for path in sorted((out / "transcripts").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record["module"] != "event_parser" or record["response"] is None:
                continue
            found = MARKER.search(record["response"]["text"])
            if found:
                names[record["run"].replace("__", "/")] = found.group(1)
    return names


def every_output(out: Path, *texts: str) -> str:
    """Everything a run wrote (every file under `out`, recursively) plus the given texts (stdout, stderr)."""
    parts = list(texts)
    for path in sorted(out.rglob("*")):
        if path.is_file():
            parts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


def edsb_in_process(args: Sequence[str], capsys: Any) -> EdsbResult:
    """`edsb ARGS` through `edsb.cli.main` in this process (no interpreter start-up); `capsys` is pytest's fixture."""
    import time

    import pytest

    from edsb.cli import main

    started = time.monotonic()
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    captured = capsys.readouterr()
    code = exit_info.value.code
    returncode = 0 if code is None else code if isinstance(code, int) else 1
    return EdsbResult(returncode, captured.out, captured.err, time.monotonic() - started)


def transcript_records(out: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted((out / "transcripts").glob("*.jsonl")):
        records += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return records
