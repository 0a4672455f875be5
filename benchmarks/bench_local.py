"""Where the time of `--model local` goes, and what the prefix states save: before (every request from an empty
context) and after, side by side, each arm in its own child process, alternating.

Prints, for the Narrator request of `ours/tc13-d0-r0` (a real prompt: system message, few-shot pair, scene): the
prefill of the shared head (system and examples, whole 512-token batches), the prefill of the rest (the scene), the
generation with and without the JSON grammar; then one request cold and from its saved head; then the README's 4-run
smoke (`edsb run --model local --cases 13,60 --repeats 1`, response cache off) per arm, wall and CPU seconds.
Usage: `EDSB_DATA=... python benchmarks/bench_local.py [--rounds N] [--no-smoke]` (minutes on two cores).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from edsb.data.benchmark import Benchmark
from edsb.llm import ChatRequest
from edsb.llm.local import LocalChatModel
from edsb.planning.messages import narrator_request
from edsb.planning.prompt_pack import load_prompt_pack
from edsb.planning.scenario import build_scenario
from edsb.planning.variants import get_variant


def narrator(json_mode: bool = True, max_tokens: int | None = None) -> ChatRequest:
    benchmark = Benchmark.open()
    scenario = build_scenario(benchmark, benchmark.cases[13], 0, 0, get_variant("ours"))
    prompt = narrator_request(scenario, load_prompt_pack(benchmark))
    return ChatRequest(messages=prompt.messages, temperature=0.1, json_mode=json_mode, max_tokens=max_tokens)


def timed(call):  # type: ignore[no-untyped-def]
    wall, cpu = time.perf_counter(), time.process_time()
    result = call()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def breakdown(arm: str = "before") -> dict[str, object]:
    """The stages of one Narrator request on one context with every core (`arm` is not used): prefill of the head
    and of the rest timed on their own; then the request cold with 1 token (its prefill), with 128 tokens in JSON
    mode and in text mode (generation = the difference; the grammar = JSON minus text)."""
    model = LocalChatModel()
    asyncio.run(model.load())
    context = model._contexts[0]
    llama = context.llama
    messages = [message.model_dump() for message in narrator().messages]
    head, full = model._shared_head(context, messages), model._prompt_tokens(context, messages)
    model.prefix_cache = False  # the requests below: every prompt evaluated from an empty context
    llama.reset()
    _, head_s, head_cpu = timed(lambda: llama.eval(list(head)))
    _, rest_s, rest_cpu = timed(lambda: llama.eval(full[len(head) :]))
    figures: dict[str, object] = {"prompt_tokens": len(full), "head_tokens": len(head)}
    figures |= {
        "prefill_head": f"{head_s:.1f} s ({head_cpu:.1f} s CPU)",
        "prefill_rest": f"{rest_s:.1f} s ({rest_cpu:.1f} s CPU)",
    }
    for label, mode, tokens in (("prefill only", True, 1), ("json", True, 128), ("text", False, 128)):
        answer, wall, cpu = timed(lambda mode=mode, tokens=tokens: asyncio.run(model.complete(narrator(mode, tokens))))
        figures[label] = f"{wall:.1f} s ({cpu:.1f} s CPU), {answer.completion_tokens} tokens"
    return figures


def one_request(arm: str) -> dict[str, object]:
    """The Narrator request twice on one model: the second starts from the saved head when prefix states are on."""
    model = LocalChatModel(prefix_cache=arm == "after", instances=1)
    asyncio.run(model.load())
    request = narrator(max_tokens=64)
    first, first_s, _ = timed(lambda: asyncio.run(model.complete(request)))
    second, second_s, cpu = timed(lambda: asyncio.run(model.complete(request)))
    assert first.text == second.text
    return {"arm": arm, "first_s": round(first_s, 2), "again_s": round(second_s, 2), "again_cpu_s": round(cpu, 2)}


def smoke(arm: str) -> dict[str, object]:
    """The README's smoke in this process. before: one context with every core, each request from an empty context
    (edsb before prefix states); after: the default (prefix states, a context per run in flight up to the cores)."""
    import edsb.llm.factory as factory
    from edsb.cli import main

    if arm == "before":
        before = functools.partial(LocalChatModel, prefix_cache=False)
        factory.LocalChatModel = lambda target, instances: before(target)  # type: ignore[assignment,misc]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "smoke"
        args = ["run", "--model", "local", "--cases", "13,60", "--repeats", "1", "--no-cache", "--quiet", "--out"]
        _, wall, cpu = timed(lambda: _run(main, [*args, str(out)]))
        records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    texts = sorted((r["key"], r["status"], r.get("error_kind") or "", r["completion_tokens"]) for r in records)
    return {"arm": arm, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "runs": texts}


def _run(main, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    stdout, sys.stdout = sys.stdout, open(os.devnull, "w")  # noqa: SIM115 - the run's tables are not the point
    try:
        main(args)
    except SystemExit as exit_:
        if exit_.code:
            raise
    finally:
        sys.stdout.close()
        sys.stdout = stdout


def child(what: str, arm: str) -> dict[str, object]:
    completed = subprocess.run([sys.executable, __file__, "--child", what, arm], capture_output=True, text=True)
    if completed.returncode:
        raise SystemExit(f"{what} {arm} failed:\n{completed.stderr}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main_bench() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-smoke", action="store_true")
    parser.add_argument("--child", nargs=2)
    options = parser.parse_args()
    if options.child:
        what, arm = options.child
        print(json.dumps({"breakdown": breakdown, "request": one_request, "smoke": smoke}[what](arm)))  # type: ignore[operator]
        return
    print(f"cores {os.cpu_count()}, load average at start {os.getloadavg()[0]:.2f}")
    print("breakdown", child("breakdown", "before"))
    whats = ["request"] + ([] if options.no_smoke else ["smoke"])
    for round_ in range(options.rounds):
        for what in whats:
            for arm in ("before", "after") if round_ % 2 == 0 else ("after", "before"):
                print(what, child(what, arm), f"load {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main_bench()
