"""`edsb score`: plans made by any planner, judged as a run judges them."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from edsb.cli.app import Command, app, err
from edsb.cli.options import DataOption, OfflineOption, PerturbOption
from edsb.errors import UsageError
from edsb.settings.run import SAMPLER_HELP
from edsb.settings.vocab import SamplerName


@app.command("score", cls=Command)
def score_command(
    plans: Annotated[str, typer.Argument(metavar="PLANS", help="JSONL file of plans (`-` for stdin), one per line.")],
    sampler: Annotated[SamplerName, typer.Option(metavar="SAMPLER", help=SAMPLER_HELP + ".")] = SamplerName.REFERENCE,
    seed: Annotated[
        int, typer.Option(metavar="N", help="Seed of the position sampler; line n is drawn from (seed, n).")
    ] = 0,
    data: DataOption = None,
    perturb: PerturbOption = 0,
    offline: OfflineOption = False,
) -> None:
    """Score plans made by any planner with the official evaluator's semantics (bring your own planner).

    Input lines: {"case": 0, "distraction": 1, "plan": {character: {"target_action": [...], "relationships": [...],
    "sampled_position": \\[x, y] or null}}}. A PI entry with relationships and no point is sampled as the pipeline
    samples it. Output: one verdict line per input line on stdout, summary on stderr.
    """
    from edsb.data.benchmark import Benchmark
    from edsb.planning.sampler import line_sampler
    from edsb.scoring.score_file import score_lines, summarize_scores

    benchmark = Benchmark.open(data, perturb=perturb, fetch=True, offline=offline)
    if plans == "-":
        source = sys.stdin
    else:
        try:
            source = open(plans, encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise UsageError(f"{plans}: cannot read ({exc.strerror})") from None
    outputs = []
    try:
        lines = (line.rstrip("\n") for line in source)
        for output in score_lines(lines, benchmark, line_sampler(sampler, seed)):
            outputs.append(output)
            sys.stdout.write(json.dumps(output) + "\n")
    finally:
        if source is not sys.stdin:
            source.close()
    if not outputs:  # nothing to score is a mistake (a wrong file, an empty pipe), not a perfect result
        raise UsageError(f"{'stdin' if plans == '-' else plans}: no plans to score (the input is empty)")
    err.print(summarize_scores(outputs).text(), markup=False, highlight=False)
