"""Hostile text: the Narrator's trailing-group cleaning against the reference's regex on adversarial
activities, and what making text valid Unicode costs per run.

Figures (one line each, `name: value (ratio ..., ...)`):
- `trailing_group_{n}k_ms`: the linear scan on its worst case of n thousand characters (`"a(" * n/2 + ")"`: it
  visits every `(`), with the ratio of the reference regex's time on the pathological activity of the same size
  (`"Ryan texts" + " (" * n/2 + "x"`; the regex is quadratic there: a 120 KB activity took 49 s; timed up to 24 KB);
- `hygiene_per_run_us`: the cleaning a run pays when nothing needs repair (its two requests' messages, two responses,
  the plan and the event, cleaned and bounded), with the ratio to building those messages and responses unchecked.

Usage: EDSB_DATA=... python benchmarks/bench_text.py [--smoke]
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from edsb.llm.protocol import ChatResponse, Message  # noqa: E402
from edsb.planning.narrator import drop_trailing_group  # noqa: E402
from edsb.text import TextLimits, TextRepairs  # noqa: E402

REFERENCE = re.compile(r"\s\(.*?\)$")


def _best(action: Callable[[], Any], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best


def trailing_group(sizes: tuple[int, ...]) -> None:
    for size in sizes:
        issue = "Ryan texts" + " (" * (size * 500) + "x"  # the regex's worst case: it fails at every ` (`
        worst = "a(" * (size * 500) + ")"  # the scan's: it visits every `(`
        scan = _best(functools.partial(drop_trailing_group, worst), 20)
        regex = _best(functools.partial(REFERENCE.sub, "", issue), 1)
        assert drop_trailing_group(issue) == REFERENCE.sub("", issue)
        assert drop_trailing_group(worst) == REFERENCE.sub("", worst)
        print(
            f"trailing_group_{size}k_ms: {scan * 1e3:.4f} (ratio {regex / scan:.0f}x: the regex took "
            f"{regex * 1e3:.1f} ms on the issue's activity of the same size; the scan's time is on its own worst case)"
        )


def hygiene_per_run(runs: int) -> None:
    prompt = "You are the Narrator. " * 600  # about 13 KB, as a system prompt with its examples
    messages = [{"role": "system", "content": prompt}, {"role": "user", "content": "query " * 300}]
    response = {"text": "```python\n" + "x = 1\n" * 40 + "```", "prompt_tokens": 1, "completion_tokens": 1}
    response |= {"latency_s": 0.1, "model": "gpt-4o", "finish_reason": "stop"}
    limits = TextLimits()

    def checked() -> None:
        for _ in range(2):
            [Message.model_validate(m) for m in messages]
            ChatResponse.model_validate(response)
        repairs = TextRepairs()
        plan = {"David": {"target_action": ["eat", "sit"], "relationships": ["sit on chair_2"]}}
        repairs.bounded_json(repairs.json(plan, "code"), limits.text_chars, "plan")
        repairs.bounded_json(repairs.json({"characters": ["David"], "activity": "eat"}, "event"), 2000, "event")

    def unchecked() -> None:
        for _ in range(2):
            [Message.model_construct(**m) for m in messages]
            ChatResponse.model_construct(**response)

    with_cleaning = _best(lambda: [checked() for _ in range(runs)], 15) / runs
    without = _best(lambda: [unchecked() for _ in range(runs)], 15) / runs
    extra = with_cleaning - without
    print(f"hygiene_per_run_us: {extra * 1e6:.1f} (ratio {with_cleaning / without:.2f} of building them unchecked)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="small sizes, a second")
    args = parser.parse_args()
    load = os.getloadavg()
    trailing_group((2, 4) if args.smoke else (6, 12, 24))
    hygiene_per_run(200 if args.smoke else 5000)
    print(f"machine: {os.cpu_count()} cores, load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
