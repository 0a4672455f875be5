"""The estimated cost of a Table 1 sweep synchronously, with the provider's prompt cache, through its batch API, and
both, from a recorded run's requests.

    python benchmarks/bench_cost.py RUN_DIR       # a run directory with transcripts (any `edsb run`)
    python benchmarks/bench_cost.py               # records a Table 1 sweep of the scripted loopback model first
    python benchmarks/bench_cost.py --smoke       # the same on a few runs

Each request's input is split into its system prompt, its example turns and its own query by characters, and the
parts scaled to the prompt tokens the run recorded; `--count chars` counts four characters a token instead (the
scripted loopback model reports the query's tokens alone, so the synthetic sweep is counted that way). The prompt
cache is replayed over the requests in the order they started, a prefix living 5 minutes after its last use:
- Anthropic caches what edsb marks (the system prompt and the prefix up to the last example turn), from 1,024
  tokens; the first request of a prefix writes it (1.25 times the input price), later ones read it (a tenth);
  under `--batch` the marks live an hour, and a write costs twice the input price;
- OpenAI caches prompts of 1,024 tokens or more on its own, by the longest prefix seen before (whole messages
  here), in steps of 128 tokens, at its cached rate, with no charge for writing.
Batch prices are the price table's `BATCH_FACTOR`; on Anthropic the cache's rates apply inside a batch too, on
OpenAI a batch is priced without them. Figures: `<model>_<mode>_usd: X (ratio to synchronous Y)`, the share of the
input read from the cache, and the sweep's size.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _loopback import LoopbackServer, first_cases  # noqa: E402

from edsb.llm.protocol import text_id  # noqa: E402
from edsb.llm.transcripts import TranscriptRecord, read_transcripts, transcripts_dir  # noqa: E402
from edsb.report.cost import Price, batch_price, estimate_cost, price_for  # noqa: E402
from edsb.report.summary_types import ModuleTokens, Tokens  # noqa: E402

MODELS = {"gpt_4o": "openai:gpt-4o-2024-08-06", "claude_sonnet_4_5": "anthropic:claude-sonnet-4-5"}
CACHE_TTL_S = 300.0
HOUR_TTL_S = 3600.0
CACHE_MINIMUM = 1024  # tokens: the shortest prefix either provider caches (Claude Sonnet and Opus, GPT-4o)
OPENAI_STEP = 128


@dataclass(frozen=True)
class Request:
    """One recorded request as the cost sees it: its messages (content addresses) and their input tokens."""

    started: float
    module: str
    ids: tuple[str, ...]
    tokens: tuple[int, ...]
    completion: int

    def shared_ends(self) -> list[int]:
        """Where Anthropic's markers end a prefix: after the system prompt and after the last example turn."""
        examples = len(self.ids) - 1
        return sorted({end for end in (1, examples) if 0 < end < len(self.ids)})


def requests_of(records: list[TranscriptRecord], count: str) -> list[Request]:
    """The answered requests, their input split by message (recorded tokens in proportion to characters, or
    four characters a token)."""
    found = []
    for record in records:
        response = record.response
        if response is None or response.source != "model":
            continue
        texts = [message.content for message in record.request.messages]
        chars = max(sum(map(len, texts)), 1)
        scale = 0.25 if count == "chars" else response.prompt_tokens / chars
        ids = tuple(f"{message.role}:{text_id(message.content)}" for message in record.request.messages)
        tokens = tuple(round(len(text) * scale) for text in texts)
        found.append(Request(record.started_at.timestamp(), record.module, ids, tokens, response.completion_tokens))
    return sorted(found, key=lambda request: request.started)


def replay_cache(requests: list[Request], provider: str, ttl: float = CACHE_TTL_S) -> list[tuple[int, int]]:
    """(tokens read from the cache, tokens written to it) per request, as the provider's cache would have served
    the requests in their order, a prefix living `ttl` seconds after its last use."""
    seen: dict[tuple[str, ...], float] = {}
    served = []
    for request in requests:
        ends = request.shared_ends() if provider == "anthropic" else list(range(1, len(request.ids) + 1))
        ends = [end for end in ends if sum(request.tokens[:end]) >= CACHE_MINIMUM]
        live = [end for end in ends if request.started - seen.get(request.ids[:end], -1e18) <= ttl]
        hit = max(live, default=0)
        for end in ends:
            seen[request.ids[:end]] = request.started
        read = sum(request.tokens[:hit])
        if provider == "anthropic":
            served.append((read, sum(request.tokens[hit : max(ends, default=0)])))
        else:
            served.append((read // OPENAI_STEP * OPENAI_STEP, 0))
    return served


def tokens_of(requests: list[Request], served: list[tuple[int, int]] | None) -> Tokens:
    """The sweep's token counts by module, cached input apart when `served` says what the cache did."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for i, request in enumerate(requests):
        read, written = served[i] if served is not None else (0, 0)
        for j, value in enumerate((sum(request.tokens), request.completion, read, written)):
            counts[request.module][j] += value
    by_module = {
        module: ModuleTokens(prompt=p, completion=c, cached=r, cache_write=w) for module, (p, c, r, w) in counts.items()
    }
    return Tokens(
        total_prompt=sum(module.prompt for module in by_module.values()),
        total_completion=sum(module.completion for module in by_module.values()),
        by_module=by_module,
        mean_prompt_every_run=0.0,
        mean_completion_every_run=0.0,
    )


def report(requests: list[Request]) -> None:
    """One line per figure: the sweep's size, then each model's four costs and its cache's share of the input."""
    plain = tokens_of(requests, None)
    shared = sum(sum(request.tokens[:-1]) for request in requests)
    print(f"requests: {len(requests)} (answered by the model, not the response cache)")
    print(f"input_tokens_m: {plain.total_prompt / 1e6:.2f} (output {plain.total_completion / 1e6:.3f} M)")
    print(f"shared_prefix_share: {shared / max(plain.total_prompt, 1):.3f} (system prompt and example turns)")
    for name, spec in MODELS.items():
        price, provider = price_for(spec), spec.partition(":")[0]
        assert price is not None
        batch = batch_price(spec, price)
        assert batch is not None
        cached = tokens_of(requests, replay_cache(requests, provider))
        # a batch run marks Anthropic's prefix for an hour (the batch price has the 1-hour write rate)
        hour = tokens_of(requests, replay_cache(requests, provider, HOUR_TTL_S)) if provider == "anthropic" else cached
        read = sum(module.cached for module in cached.by_module.values())
        print(f"{name}_cache_read_share: {read / max(cached.total_prompt, 1):.3f} (of the input, from the cache)")
        sync = _usd(plain, price)
        for mode, usd in (
            ("sync", sync),
            ("cache", _usd(cached, price)),
            ("batch", _usd(plain, batch)),
            ("batch_cache", _usd(hour, batch)),
        ):
            print(f"{name}_{mode}_usd: {usd:.2f} (ratio to synchronous {usd / sync:.3f}; {price.source})")


def _usd(tokens: Tokens, price: Price) -> float:
    return estimate_cost(tokens, price)["total"]


def record_sweep(out: Path, smoke: bool) -> None:
    """A Table 1 sweep (or a few runs of it) of the scripted loopback model, recorded in `out`."""
    selection = ["--preset", "table1", *(["--cases", first_cases(8, 1), "--repeats", "1"] if smoke else [])]
    with LoopbackServer(0.0) as server:
        command = [sys.executable, "-m", "edsb", "run", "--model", "openai:scripted", "--base-url", server.base_url]
        command += [*selection, "--no-cache", "--concurrency", "16", "--quiet", "--out", str(out)]
        env = {**os.environ, "OPENAI_API_KEY": "not-a-secret"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
        done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode not in (0, 1):  # 1: some runs failed as the scripted model means them to
        raise SystemExit(f"edsb run failed ({done.returncode}): {done.stderr[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", nargs="?", type=Path, help="a run directory (default: record a synthetic sweep)")
    parser.add_argument("--count", choices=("recorded", "chars"), help="input tokens: as recorded, or 4 chars each")
    parser.add_argument("--smoke", action="store_true", help="a synthetic sweep of a few runs")
    args = parser.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as work:
        run_dir = args.run_dir
        if run_dir is None:
            if not os.environ.get("EDSB_DATA"):
                raise SystemExit("bench_cost: set EDSB_DATA to the benchmark data directory, or name a run directory")
            run_dir = Path(work) / "sweep"
            record_sweep(run_dir, args.smoke)
        count = args.count or ("recorded" if args.run_dir is not None else "chars")
        report(requests_of(read_transcripts(transcripts_dir(run_dir)), count))
    print(f"machine: {os.cpu_count()} cores, load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
