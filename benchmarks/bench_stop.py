"""Times how long sandbox processes outlive a stopped `edsb run` (prints one line per stop and sandbox; not a test).

    EDSB_DATA=/path/to/edsb-data python benchmarks/bench_stop.py [--baseline-src DIR] [--code-timeout 60] [--cap 40]
        [--tries 1]

Each arm starts `edsb run` against a loopback model whose two Event Parser programs fill 160 MiB and then sleep
(exact; `time` is refused under restricted) or spin, waits until both are running (two processes under edsb
holding that memory), stops edsb (SIGTERM, SIGHUP, a second SIGINT, or SIGKILL) and polls /proc until edsb and every
process that was under it are gone or zombies, for at most `--cap` seconds. The `sampler` arms stop a PI sweep
instead, once a sampler worker is annealing the worst plan the bound on cost terms lets through. `--baseline-src`
runs another checkout's `src` the same way (e.g. `git archive <commit> src | tar -x -C DIR`), arm by arm. A figure
is the milliseconds until the last process was gone (the median and the maximum over `--tries` sweeps); its ratio is
against the `--code-timeout` a run's code could otherwise keep running for.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.support.edsb_cli import child_env, scripted_run_args, start_edsb  # noqa: E402
from tests.support.openai_server import OpenAIServer  # noqa: E402
from tests.support.processes import cpu_ticks, descendants, nice, poll, process, resident_bytes, running  # noqa: E402
from tests.support.scripted_programs import ProgramScript, program, run_args  # noqa: E402

from edsb.planning.sampler import MAX_SAMPLING_TERMS  # noqa: E402

HOLD = 160 << 20
SLEEP = f"hold = np.ones({HOLD // 8})\nimport time\ntime.sleep(10 ** 6)"
SPIN = f"hold = np.ones({HOLD // 8})\nwhile True:\n    pass"
# A PI case (60, Theodore) whose one character is placed by every cost term allowed, which never converge.
WORST = [f"close to chair_{j % 6 + 1}" for j in range(MAX_SAMPLING_TERMS - 1)]
WORST_PLAN = f"t = get_character('Theodore')\nt.set_position(Area({WORST!r}))\nt.set_target_action('idle')\nreturn [t]"
THEODORE = json.dumps({"event": {"characters": ["Theodore"], "activity": "stand by the fridge"}})
SAMPLER_WORKER_NICE = 19  # the sampler's workers run at the lowest priority: nothing else of edsb does
STOPS = {"sigterm": "SIGTERM", "sighup": "SIGHUP", "second_sigint": "SIGINT", "sigkill": "SIGKILL"}


def _holding(pid: int) -> int:
    """How many processes under `pid` hold a program's memory: each is running model code."""
    return sum(resident_bytes(below) >= HOLD for below, _ in descendants(pid))


def _annealing(pid: int) -> int:
    """How many sampler workers under `pid` have begun a job (an idle one, just forked, has used no CPU time)."""
    return sum(nice(below) == SAMPLER_WORKER_NICE and cpu_ticks(below) >= 10 for below, _ in descendants(pid))


def _sweep(server_url: str, out: Path, sandbox: str, workload: str, code_timeout: float) -> list[str]:
    """The `edsb run` arguments of an arm."""
    if workload == "sampler":
        selection = ["--variant", "scene-graph", "--cases", "60", "--distraction", "0", "--repeats", "4"]
        return scripted_run_args(server_url, out, *selection, "--concurrency", "4", "--no-cache", "--quiet",
                                 "--sandbox", sandbox)  # fmt: skip
    args = run_args(server_url, out, 2, "--concurrency", "2", sandbox=sandbox)
    return [*args, "--code-timeout", str(code_timeout)]


def _stop(edsb: subprocess.Popen[bytes], how: str) -> None:
    if how == "second_sigint":
        edsb.send_signal(signal.SIGINT)
        seen = b""
        assert edsb.stderr is not None
        while b"Ctrl-C again" not in seen and edsb.poll() is None:
            if select.select([edsb.stderr], [], [], 1)[0]:
                seen += os.read(edsb.stderr.fileno(), 4096)
    edsb.send_signal(signal.Signals[STOPS[how]])


def lifetime(
    src: Path, sandbox: str, how: str, code_timeout: float, cap: float, workload: str = "code"
) -> float | None:
    """Seconds from the stop until no process of the sweep remained; None if some were still running at `cap`."""
    if workload == "sampler":
        script = ProgramScript([program(f"worst {i}", WORST_PLAN) for i in range(4)], narrator_reply=THEODORE)
    else:
        script = ProgramScript([program("a", SLEEP if sandbox == "exact" else SPIN), program("b", SPIN)])
    with tempfile.TemporaryDirectory() as tmp, OpenAIServer(script) as server:
        env = {**child_env(Path(tmp) / "cache"), "PYTHONPATH": str(src)}
        args = _sweep(server.base_url, Path(tmp) / "out", sandbox, workload, code_timeout)
        edsb = start_edsb(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        processes = set()
        try:
            ready = (lambda: _annealing(edsb.pid) >= 1) if workload == "sampler" else (lambda: _holding(edsb.pid) >= 2)
            if poll(ready, 300) is None:
                raise SystemExit(f"the {workload} arm never got going ({src}, {sandbox})")
            processes = descendants(edsb.pid) | {found for found in [process(edsb.pid)] if found is not None}
            _stop(edsb, how)
            return poll(lambda: not running(processes), cap)
        finally:
            for pid, _ in running(processes):  # only what this arm started
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            if edsb.poll() is None:
                edsb.kill()
            edsb.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-src", type=Path, default=None, help="another checkout's src directory")
    parser.add_argument("--code-timeout", type=float, default=60.0)
    parser.add_argument("--cap", type=float, default=40.0, help="seconds to wait for the processes to end")
    parser.add_argument("--sandboxes", default="exact,restricted")
    parser.add_argument("--workloads", default="code,sampler", help="model code running, sampler workers annealing")
    parser.add_argument("--tries", type=int, default=1, help="sweeps stopped per arm (median and maximum)")
    args = parser.parse_args()
    arms = {"": ROOT / "src", **({"baseline_": args.baseline_src.resolve()} if args.baseline_src else {})}
    load = os.getloadavg()[0]
    sandboxes = args.sandboxes.split(",")
    for workload in args.workloads.split(","):
        # The sampler runs outside the sandbox: one sandbox is enough for its arms.
        for sandbox in sandboxes if workload == "code" else sandboxes[:1]:
            for how in STOPS:
                name = f"stop_{sandbox}_{how}_ms" if workload == "code" else f"stop_sampler_{how}_ms"
                for prefix, src in arms.items():
                    found = [
                        lifetime(src, sandbox, how, args.code_timeout, args.cap, workload) for _ in range(args.tries)
                    ]
                    print(f"{prefix}{name}: {_figure(found, args.cap, args.code_timeout)}", flush=True)
    print(f"machine: {os.cpu_count()} cores, load average {load:.2f} at start, uid {os.getuid()}")


def _figure(found: list[float | None], cap: float, code_timeout: float) -> str:
    """The median and maximum of the tries, in milliseconds; a try still running at the cap counts as the cap."""
    values = [cap if seconds is None else seconds for seconds in found]
    median, most = statistics.median(values), max(values)
    above = " or more (still running at the cap)" if None in found else ""
    return (f"{median * 1000:.1f} median, {most * 1000:.1f} max over {len(values)} (ratio {most / code_timeout:.4f} "
            f"of the code timeout{above})")  # fmt: skip


if __name__ == "__main__":
    main()
