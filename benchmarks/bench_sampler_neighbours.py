"""Honest runs beside the worst PI sampler plans: their latency against the same runs alone.

One `edsb run` (a child process) sweeps case 13 (two requests, no sampling) and the House PI cases 60-62 (two
requests and the annealer) at `--concurrency 24`, against a loopback server named `localhost` (the name goes through
the resolver, as a real endpoint's does) that answers at once. In the `beside` arm the first `--hostile` Event Parser
requests of the PI cases are answered with the worst plan the bound on cost terms lets through (one character, 23
`close to` relationships that never converge), so those runs keep the sampler busy for its whole CPU bound; in the
`alone` arm the same requests get a plan one relationship over that bound, refused before any sampling, so the sweep
holds the same runs and the honest ones meet no sampling beside them. The figures are the honest runs' own wall time
(`wall_s` of results.jsonl, from the run's start to its result), median and maximum, in each arm, and their ratio;
and how many runs ended `incomplete`. Arms alternate ABBA.

`--src DIR --arms beside` measures another checkout's `src` (e.g. `git archive <commit> src`) the same way.

Usage: EDSB_DATA=/path/to/edsb-data python benchmarks/bench_sampler_neighbours.py [--rounds 1] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.support.openai_server import OpenAIServer, RecordedRequest, Reply  # noqa: E402

from edsb.planning.sampler import MAX_SAMPLING_TERMS  # noqa: E402

# Each case's one character and the relationship a good model writes for it.
PI_CHARACTERS = {
    "Theodore": "in front of fridge_1",
    "Franklin": "adjacent to coffee_maker_1",
    "Benjamin": "adjacent to record_player_1",
}
WORST = [f"close to chair_{j % 6 + 1}" for j in range(MAX_SAMPLING_TERMS - 1)]
REFUSED = [*WORST, "close to chair_1"]  # one term over the bound: refused before any search
DAVID_EVENT = {"characters": ["David"], "activity": "eat a sandwich sitting in the kitchen"}
DAVID_CODE = "d = get_character('David')\nd.set_target_action('eat')\nd.set_position(get_area_to_sit_on('chair_2'))"


def _code(body: str, name: str) -> str:
    indented = "".join(f"    {line}\n" for line in body.splitlines())
    return f"```python\n# {name}\ndef parse_event():\n{indented}```\n"


def _pi_code(character: str, relationships: list[str]) -> str:
    body = f"c = get_character({character!r})\nc.set_position(Area({relationships!r}))\nreturn [c]"
    return _code(body, "hostile" if len(relationships) > 1 else "honest")


class Script:
    """Narrator: the query's character does something; Event Parser: the first `hostile` PI requests get the worst
    plan, every other one its honest plan. The character is read from the last message (the run's own query)."""

    def __init__(self, hostile: int, plan: list[str]) -> None:
        self.hostile_left = hostile
        self.plan = plan
        self.lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        body = request.json()
        query = str(body["messages"][-1]["content"])
        character = next((name for name in PI_CHARACTERS if name in query), None)
        if (body.get("response_format") or {}).get("type") == "json_object":
            event = {"characters": [character], "activity": "stand there"} if character else DAVID_EVENT
            return Reply.completion(json.dumps({"event": event}))
        if character is None:
            return Reply.completion(_code(DAVID_CODE, "honest"))
        with self.lock:
            hostile, self.hostile_left = self.hostile_left > 0, self.hostile_left - 1
        return Reply.completion(_pi_code(character, self.plan if hostile else [PI_CHARACTERS[character]]))


def sweep(hostile: int, plan: list[str], repeats: int, out: Path, src: Path) -> tuple[list[float], int, int, float]:
    """(honest runs' wall times, hostile runs, incomplete runs, sweep wall) of one `edsb run`."""
    with OpenAIServer(Script(hostile, plan)) as server:
        args = [
            *("run", "--model", "openai:bench", "--base-url", f"http://localhost:{server.port}/v1"),
            *("--variant", "scene-graph", "--cases", "13,60,61,62", "--distraction", "0"),
            *("--repeats", str(repeats), "--concurrency", "24", "--no-cache", "--quiet", "--out", str(out)),
        ]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")])),
        }
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "edsb", *args], check=True, env=env, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - start
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    worst = [r for r in records if _hostile(r)]
    honest = [r["wall_s"] for r in records if not _hostile(r)]
    return honest, len(worst), sum(r["status"] == "incomplete" for r in records), wall


def _hostile(record: dict) -> bool:
    """Refused or stopped by a sampler bound, or sampled with the worst plan's many relationships."""
    plan = record.get("plan") or {}
    refused = record.get("error_kind") == "code_output"
    return refused or any(len(entry["relationships"]) > 1 for entry in plan.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="ABBA rounds")
    parser.add_argument("--hostile", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=10, help="of each case: 4 cases, the PI ones hold the hostile")
    parser.add_argument("--smoke", action="store_true", help="2 hostile runs among 12, one round")
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the edsb source tree to run")
    parser.add_argument("--arms", default="alone,beside", help="which arms to run")
    options = parser.parse_args()
    hostile, repeats, rounds = (2, 3, 1) if options.smoke else (options.hostile, options.repeats, options.rounds)
    loads = " ".join(f"{load:.2f}" for load in os.getloadavg())
    arms: dict[str, list[tuple[list[float], int, int, float]]] = {"alone": [], "beside": []}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(rounds):
            for arm in ("alone", "beside", "beside", "alone")[: 2 if options.smoke else 4]:
                if arm not in options.arms.split(","):
                    continue
                out = Path(scratch) / f"{arm}-{round_}-{len(arms[arm])}"
                arms[arm].append(sweep(hostile, WORST if arm == "beside" else REFUSED, repeats, out, options.src))
    _report(arms, hostile)
    print(f"machine: {os.cpu_count()} cores, load average at start {loads}", flush=True)


def _report(arms: dict[str, list[tuple[list[float], int, int, float]]], hostile: int) -> None:
    alone = [wall for honest, _, _, _ in arms["alone"] for wall in honest]
    beside = [wall for honest, _, _, _ in arms["beside"] for wall in honest]
    for name, walls in (("alone", alone), ("beside", beside)):
        if walls:
            print(f"honest_{name}_median_s: {statistics.median(walls):.3f} ({len(walls)} honest runs)", flush=True)
            print(f"honest_{name}_max_s: {max(walls):.3f}", flush=True)
    incomplete = sum(count for arm in arms.values() for _, _, count, _ in arm)
    sweeps = ", ".join(f"{name} {statistics.mean(w for *_, w in runs):.1f} s" for name, runs in arms.items() if runs)
    print(f"incomplete_runs: {incomplete} (target 0; sweep wall {sweeps}; {hostile} hostile per beside sweep)")
    if alone and beside:
        worst_seen = [count for _, count, _, _ in arms["beside"]]
        ratio = statistics.median(beside) / statistics.median(alone)
        print(f"honest_median_ratio: {ratio:.2f} (beside {worst_seen} worst plans / alone, target 2)", flush=True)
        print(f"honest_max_ratio: {max(beside) / max(alone):.2f} (target 5)", flush=True)


if __name__ == "__main__":
    main()
