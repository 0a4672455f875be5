"""The oracle at full strength: `--preset table1` and `--preset table2` with their five repeats, then the
`oracle-wrong` negative control on the same grid.

Every cell must read 1.0 (1.0) for `oracle` (on Table 2 the seeded position sampler must land inside the expected
area in all five repeats) and 0.0 for `oracle-wrong`. Prints one line per model and preset: runs, passes, failures,
errors, the worst and best cell and the wall time. Exit status 1 if any cell is off. Usage:
`EDSB_DATA=... python benchmarks/bench_oracle.py` (about a minute on two cores).
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
import time
from pathlib import Path

from edsb.cli import main

PRESETS = ("table1", "table2")
EXPECTED = {"oracle": 1.0, "oracle-wrong": 0.0}


def run(model: str, preset: str, out: Path) -> float:
    started = time.perf_counter()
    stdout, sys.stdout = sys.stdout, io.StringIO()  # the run's own tables are summarised below
    try:
        main(["run", "--model", model, "--preset", preset, "--out", str(out), "--quiet"])
    except SystemExit as exit_:
        if exit_.code:
            raise
    finally:
        sys.stdout = stdout
    return time.perf_counter() - started


def main_bench() -> int:
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for model, expected in EXPECTED.items():
            for preset in PRESETS:
                out = Path(tmp) / f"{model}-{preset}"
                wall = run(model, preset, out)
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
                    f"{model:13} {preset}: {len(records)} runs, {statuses.count('passed')} passed, "
                    f"{statuses.count('failed')} failed, {statuses.count('error')} errors; "
                    f"cells {min(rates)}..{max(rates)} (want {expected}) {'ok' if good else 'OFF'}; {wall:.1f} s"
                )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main_bench())
