"""The oracle at full strength: `--preset table1` and `--preset table2` with their five repeats, then the
`oracle-wrong` negative control on the same grid.

Every cell must read 1.0 (1.0) for `oracle` (on Table 2 the seeded position sampler must land inside the expected
area in all five repeats) and 0.0 for `oracle-wrong`. Prints one line per model and preset: runs, passes, failures,
errors, the worst and best cell and the wall time. Exit status 1 if any cell is off. Usage:
`EDSB_DATA=... python benchmarks/bench_oracle.py` (about a minute on two cores). `--perturb 1,2,3` runs the same
grids on the robustness suite's renamed benchmark under each seed instead (0 = the benchmark as published).
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


def run(model: str, preset: str, out: Path, perturb: int = 0) -> float:
    started = time.perf_counter()
    stdout, sys.stdout = sys.stdout, io.StringIO()  # the run's own tables are summarised below
    try:
        main(["run", "--model", model, "--preset", preset, "--perturb", str(perturb), "--out", str(out), "--quiet"])
    except SystemExit as exit_:
        if exit_.code:
            raise
    finally:
        sys.stdout = stdout
    return time.perf_counter() - started


def main_bench(seeds: list[int]) -> int:
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for seed, (model, expected), preset in ((s, e, p) for s in seeds for e in EXPECTED.items() for p in PRESETS):
            out = Path(tmp) / f"{model}-{preset}-{seed}"
            wall = run(model, preset, out, seed)
            records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
            summary = json.loads((out / "summary.json").read_text())
            rates = [
                cell["success_rate"]
                for entry in summary["variants"].values()
                for by_level in entry["cells"].values()
                for cell in by_level.values()
            ]
            statuses = [r["status"] for r in records]
            good = all(rate == expected for rate in rates) and "error" not in statuses
            ok &= good
            print(
                f"{model:13} {preset} perturb {seed}: {len(records)} runs, {statuses.count('passed')} passed, "
                f"{statuses.count('failed')} failed, {statuses.count('error')} errors; "
                f"cells {min(rates)}..{max(rates)} (want {expected}) {'ok' if good else 'OFF'}; {wall:.1f} s"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--perturb", default="0", help="comma-separated perturbation seeds (default 0)")
    sys.exit(main_bench([int(seed) for seed in parser.parse_args().perturb.split(",")]))
