"""A scripted loopback model that hands the Event Parser one program after another, for `edsb run` on one case.

The Narrator is always answered with one valid event for case 13 ("David eats a sandwich sitting in the kitchen");
the Event Parser gets the next program of a script. Runs use the Object List variant: the same Narrator → Event
Parser → sandbox → judge pipeline as Ours, with a scene description that exists for any number of repeats (the
narrative ones stop at 5). With `--concurrency 1` the runs of one invocation happen in repeat order, so repeat `i`
executes program `i`; every program also names itself in a comment, which the tests read back from the transcripts
rather than trusting the order.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.support.edsb_cli import child_env, edsb_child, scripted_run_args
from tests.support.openai_server import OpenAIServer, RecordedRequest, Reply
from tests.support.run_dir import read_results, transcript_records

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


class ProgramScript:
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


def run_args(base_url: str, out: Path, repeats: int, *extra: str, sandbox: str | None = None) -> list[str]:
    """`edsb run` of case 13 at level 0 with the Object List variant, `repeats` times, uncached and quiet.

    `sandbox` pins `--sandbox`: the attack suites written against one sandbox's verdicts (the restricted one's
    `code_policy`) name it, so that the host's default (`auto`, exact where the kernel allows) does not change them."""
    selection = ["--variant", VARIANT, "--cases", str(CASE), "--distraction", "0", "--repeats", str(repeats)]
    pinned = ["--sandbox", sandbox] if sandbox is not None else []
    return scripted_run_args(base_url, out, *selection, "--no-cache", "--quiet", *pinned, *extra)


def programs_by_run(out: Path) -> dict[str, str]:
    """Run key → the name of the program its Event Parser answered with, read from the run's transcript."""
    names: dict[str, str] = {}
    for record in transcript_records(out):
        if record["module"] != "event_parser" or record["response"] is None:
            continue
        found = MARKER.search(record["response"]["text"])
        if found:
            names[record["run"].replace("__", "/")] = found.group(1)
    return names


def restricted_pipeline_records(root: Path, bodies: Mapping[str, str]) -> dict[str, dict]:
    """One `edsb run --sandbox restricted` at concurrency 1 of every program (`TARGET` in a body names a file under a
    watched directory), each followed by a benign one; the invocation must exit 0 with no edsb fault and leave the
    directory empty. Program name -> its run's record."""
    targets, out = root / "targets", root / "run"
    targets.mkdir()
    script = []
    for name, body in bodies.items():
        script += [program(name, body.replace("TARGET", str(targets / name))), program(f"benign-{name}", BENIGN_BODY)]
    with OpenAIServer(ProgramScript(script)) as server:
        args = run_args(
            server.base_url, out, len(script), "--concurrency", "1", "--code-timeout", "5", sandbox="restricted"
        )
        process = edsb_child(args, env=child_env(root / "cache"), cwd=root)
    assert process.returncode == 0, process.stderr
    assert "internal_error" not in process.stderr and "Traceback" not in process.stderr
    assert list(targets.iterdir()) == []
    records = {record["key"]: record for record in read_results(out)}
    return {name: records[key] for key, name in programs_by_run(out).items()}
