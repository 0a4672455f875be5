"""The oracle at full strength: `--preset table1` and `--preset table2` with their five repeats, then the
`oracle-wrong` negative control on the same grid; and the PI ceiling of the reference's annealer.

With `--sampler optimal` every cell must read 1.0 (1.0) for `oracle` and 0.0 for `oracle-wrong`. Under the default
sampler (the reference's simulated annealing) Table 2's PI cell is what the annealer allows: every PI failure must be
a `sampler_miss` (the optimal sampler would have passed the same relationships). The ceiling line repeats the
Scene Graph half of Table 2 (50 runs) over `--ceiling-seeds` seeds: the oracle's PI score under the paper's
sampler, the best any planner can get with it. Prints one line per model, preset and sampler: runs, passes,
failures, sampler misses, errors, the worst and best cell and the wall time. Exit status 1 if any check fails.
Usage: `EDSB_DATA=... python benchmarks/bench_oracle.py [--ceiling-seeds 20] [--perturb 1,2,3]` (a minute or two on
two cores). `--perturb` runs the same grids on the robustness suite's renamed benchmark under each seed instead (0 =
the benchmark as published).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
from pathlib import Path

from edsb.cli import main

PRESETS = ("table1", "table2")
EXPECTED = {"oracle": 1.0, "oracle-wrong": 0.0}


def run(out: Path, *args: str) -> float:
    started = time.perf_counter()
    stdout, sys.stdout = sys.stdout, io.StringIO()  # the run's own tables are summarised below
    try:
        main(["run", *args, "--out", str(out), "--quiet"])
    except SystemExit as exit_:
        if exit_.code:
            raise
    finally:
        sys.stdout = stdout
    return time.perf_counter() - started


def read(out: Path) -> tuple[list[dict], list[float]]:
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    rates = [
        cell["success_rate"]
        for entry in summary["variants"].values()
        for by_level in entry["cells"].values()
        for cell in by_level.values()
    ]
    return records, rates


def line(label: str, records: list[dict], rates: list[float], verdict: str, wall: float) -> str:
    statuses = [r["status"] for r in records]
    misses = sum(bool(r.get("sampler_miss")) for r in records)
    return (
        f"{label}: {len(records)} runs, {statuses.count('passed')} passed, {statuses.count('failed')} failed "
        f"({misses} sampler misses), {statuses.count('error')} errors; cells {min(rates)}..{max(rates)} {verdict}; "
        f"{wall:.1f} s"
    )


def main_bench() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ceiling-seeds", type=int, default=20, help="seeds of the PI ceiling (0: skip it)")
    parser.add_argument("--perturb", default="0", help="comma-separated perturbation seeds (default 0)")
    args = parser.parse_args()
    perturbations = [int(seed) for seed in args.perturb.split(",")]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for perturb, (model, expected), preset in (
            (p, e, s) for p in perturbations for e in EXPECTED.items() for s in PRESETS
        ):
            out = Path(tmp) / f"{model}-{preset}-{perturb}"
            wall = run(out, "--model", model, "--preset", preset, "--sampler", "optimal", "--perturb", str(perturb))
            records, rates = read(out)
            good = all(rate == expected for rate in rates) and all(r["status"] != "error" for r in records)
            ok &= good
            verdict = f"(want {expected}) {'ok' if good else 'OFF'}"
            print(line(f"{model:13} {preset} optimal perturb {perturb}", records, rates, verdict, wall))
        # the paper's sampler: Table 2's PI failures must all be the annealer's
        out = Path(tmp) / "oracle-table2-reference"
        wall = run(out, "--model", "oracle", "--preset", "table2")
        records, rates = read(out)
        failed = [r for r in records if r["status"] == "failed"]
        good = all(r["sampler_miss"] for r in failed) and all(r["status"] != "error" for r in records)
        ok &= good
        verdict = f"(every failure a sampler miss) {'ok' if good else 'OFF'}"
        print(line(f"{'oracle':13} table2 reference", records, rates, verdict, wall))
        passes = runs = misses = 0
        started = time.perf_counter()
        for seed in range(args.ceiling_seeds):
            out = Path(tmp) / f"ceiling-{seed}"
            # An empty sampler secret draws from the seed alone, so the figure is the same in every fresh directory.
            run(out, "--model", "oracle", "--preset", "table2", "--variant", "scene-graph", "--seed", str(seed),
                "--sampler-secret", "")  # fmt: skip
            records, _ = read(out)
            runs += len(records)
            passes += sum(r["status"] == "passed" for r in records)
            misses += sum(bool(r["sampler_miss"]) for r in records)
            ok &= misses == runs - passes
        if runs:
            print(
                f"pi_ceiling_reference_sampler: {passes / runs:.3f} (ratio {passes}/{runs} oracle Scene Graph PI runs "
                f"over {args.ceiling_seeds} seeds; {misses} failures, all sampler misses; "
                f"{time.perf_counter() - started:.1f} s)"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main_bench())
