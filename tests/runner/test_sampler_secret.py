"""The PI sampler's draws are keyed by a per-directory secret that model code never sees, and the runner's sampling
work on one plan is bounded.

Before the secret, the sampler's generator and the code's `random` / `numpy.random` seed came from the same text
(`--seed` and the run key), and the child was handed that seed: a reply could compute, exactly, the point the parent
was about to draw. Now the code's seed stays as it was (reproducible per run) and the sampler's draws are keyed by a
secret made at a directory's first run, kept in its config.json, reused by a resume, and carried to another
directory only on purpose (`--sampler-secret`).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import load_scene
from edsb.llm.oracle import OracleChatModel
from edsb.planning.pipeline import RunServices
from edsb.planning.sampler import MAX_SAMPLING_TERMS, sampling_terms
from edsb.planning.sampler_rng import generator_for, secret_generator_for
from edsb.results import RunKey
from edsb.runner.config import CONFIG_FILE
from edsb.sandbox import SandboxPool
from tests.support.data import DATA
from tests.support.edsb_cli import child_env, edsb_child, run_edsb, scripted_run_args
from tests.support.network import block_network
from tests.support.openai_server import OpenAIServer
from tests.support.run_dir import read_results
from tests.support.scripted_programs import ProgramScript, program

PI_CASE = "60"  # Theodore stands in front of the fridge: one character, sampled by the annealer
KEY = RunKey("scene-graph", 60, 0, 0)


def _oracle_run(out: Path, monkeypatch: pytest.MonkeyPatch, *options: str) -> dict[str, list[float]]:
    """`edsb run` of the oracle on the PI case, three repeats: run key → the sampled point."""
    block_network(monkeypatch, allow_loopback=False)
    args = ["run", "--model", "oracle", "--variant", "scene-graph", "--cases", PI_CASE, "--repeats", "3"]
    assert run_edsb(*args, "--out", str(out), "--quiet", *options) == 0
    return {r["key"]: r["plan"]["Theodore"]["sampled_position"] for r in read_results(out)}


def test_an_empty_secret_says_model_code_can_predict_the_draws(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _oracle_run(tmp_path / "keyed", monkeypatch)
    assert "can predict the PI sampler's draws" not in capsys.readouterr().err
    _oracle_run(tmp_path / "bare", monkeypatch, "--sampler-secret", "")
    assert "note: the sampler secret is empty: model code can predict" in capsys.readouterr().err


def _secret(out: Path) -> str:
    return json.loads((out / CONFIG_FILE).read_text())["sampler_secret"]


def test_a_new_directory_gets_a_secret_and_a_resume_or_extension_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _oracle_run(tmp_path / "a", monkeypatch)
    secret = _secret(tmp_path / "a")
    assert len(secret) == 32 and int(secret, 16) >= 0
    extended = _oracle_run(tmp_path / "a", monkeypatch, "--repeats", "4")  # the fourth repeat is drawn now
    assert _secret(tmp_path / "a") == secret
    assert {key: extended[key] for key in first} == first and len(extended) == 4
    # the same seed in a fresh directory: another secret, other draws
    fresh = _oracle_run(tmp_path / "b", monkeypatch)
    assert _secret(tmp_path / "b") != secret
    assert fresh != first


def test_carrying_the_secret_to_a_fresh_directory_draws_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _oracle_run(tmp_path / "a", monkeypatch, "--seed", "5")
    carried = _oracle_run(tmp_path / "b", monkeypatch, "--seed", "5", "--sampler-secret", _secret(tmp_path / "a"))
    assert carried == first
    other_seed = _oracle_run(tmp_path / "c", monkeypatch, "--seed", "6", "--sampler-secret", _secret(tmp_path / "a"))
    assert other_seed != first


def test_a_resume_with_another_secret_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _oracle_run(tmp_path / "a", monkeypatch)
    args = ["run", "--model", "oracle", "--variant", "scene-graph", "--cases", PI_CASE, "--repeats", "3"]
    code = run_edsb(*args, "--out", str(tmp_path / "a"), "--quiet", "--sampler-secret", "not-the-same")
    assert code == 2


def test_a_directory_written_before_the_secret_keeps_drawing_from_the_seed_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "old"
    first = _oracle_run(out, monkeypatch, "--sampler-secret", "")
    config = json.loads((out / CONFIG_FILE).read_text())
    del config["sampler_secret"], config["format"]  # as edsb wrote it before the secret existed
    (out / CONFIG_FILE).write_text(json.dumps(config))
    extended = _oracle_run(out, monkeypatch, "--repeats", "4")
    assert _secret(out) == ""
    assert {key: extended[key] for key in first} == first
    services = RunServices(Benchmark.open(DATA), OracleChatModel(DATA), seed=0)
    key = RunKey("scene-graph", 60, 0, 3)
    assert services.rng(key).random() == generator_for(f"0/{key.id}").random()


def test_the_code_s_seed_no_longer_predicts_the_sampler() -> None:
    """The attack: a child seeds its own generator from what it was given (its `random` seed is the run's code
    seed) and replays the sampler's draws. It works under the old derivation, and not with a secret."""
    benchmark = Benchmark.open(DATA)
    old = RunServices(benchmark, OracleChatModel(DATA), seed=0, sampler_secret="")
    keyed = RunServices(benchmark, OracleChatModel(DATA), seed=0, sampler_secret="a" * 32)
    assert old.code_seed(KEY) == keyed.code_seed(KEY)  # the code's own seed is unchanged
    guess = np.random.default_rng(keyed.code_seed(KEY)).normal(size=4)
    assert np.array_equal(old.rng(KEY).normal(size=4), guess)  # the control: the guess used to be exact
    assert not np.allclose(keyed.rng(KEY).normal(size=4), guess)


def test_the_secret_never_reaches_the_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[bytes] = []
    original = SandboxPool._request

    def recording(self: SandboxPool, reply: str, context: object) -> dict:
        request = original(self, reply, context)  # type: ignore[arg-type]
        sent.append(pickle.dumps(request))
        return request

    monkeypatch.setattr(SandboxPool, "_request", recording)
    secret = "5ec4e7" * 6
    _oracle_run(tmp_path / "a", monkeypatch, "--sampler-secret", secret)
    assert len(sent) == 3
    assert not any(secret.encode() in request for request in sent)


def test_secret_generators_are_keyed() -> None:
    assert secret_generator_for("k", "0/x").random() == secret_generator_for("k", "0/x").random()
    assert secret_generator_for("k", "0/x").random() != secret_generator_for("l", "0/x").random()
    assert secret_generator_for("", "0/x").random() == generator_for("0/x").random()


# --- the bound on the runner's sampling work ------------------------------------------------------------------------


def test_sampling_terms_count_what_the_annealer_evaluates() -> None:
    scene = load_scene(Benchmark.open(DATA), "House")
    count = sampling_terms(
        scene,
        {
            "A": ["sit on chair_1", "close to table_1"],  # a seat: no search
            "B": ["close to table_1", "look at chair_1", "in front of fridge_1"],  # 1 + 2 terms (look at has none)
            "C": [],  # 1: collisions and the allowed area
        },
        characters=["A", "B", "C"],
    )
    assert count == 4
    refused = {"B": ["close to table_1"], "X": ["close to nothing_9"], "C": ["close to table_1"] * 50}
    assert sampling_terms(scene, refused, characters=[]) == 2  # sampling stops at X's unknown anchor


def test_the_bound_admits_every_plan_the_prompts_could_call_for() -> None:
    """A bound that refused a plan a model could mean would change verdicts the reference gives: eight characters
    (a scene's cast at distraction level 2), each placed by two relationships, stay within it."""
    scene = load_scene(Benchmark.open(DATA), "House")
    cast = {f"C{i}": ["close to table_1", "in front of fridge_1"] for i in range(8)}
    assert sampling_terms(scene, cast, characters=[]) == 24 <= MAX_SAMPLING_TERMS


def _pi_program_run(tmp_path: Path, body: str) -> dict:
    narrator = json.dumps({"event": {"characters": ["Theodore"], "activity": "stand by the fridge"}})
    with OpenAIServer(ProgramScript([program("plan", body)], narrator)) as server:
        out = tmp_path / "run"
        args = scripted_run_args(server.base_url, out, "--variant", "scene-graph", "--cases", PI_CASE)
        process = edsb_child([*args, "--repeats", "1", "--no-cache", "--quiet"], env=child_env(tmp_path / "cache"))
    assert process.returncode == 0, process.stderr
    [record] = read_results(out)
    return record


def test_a_plan_over_the_sampling_bound_is_the_model_s_output_error(tmp_path: Path) -> None:
    """The worst plan within the plan limits (11 characters × 64 `close to`, under 16 KiB) cost the runner over a
    minute of annealing; now it is refused before any search, with the reason."""
    body = (
        "chars = []\nfor i in range(11):\n    c = get_character(f'C{i}')\n"
        "    c.set_position(Area([f'close to chair_{j % 6 + 1}' for j in range(64)]))\n"
        "    c.set_target_action('idle')\n    chars.append(c)\nreturn chars"
    )
    record = _pi_program_run(tmp_path, body)
    assert (record["status"], record["error_kind"]) == ("error", "code_output"), record
    assert (
        f"cost terms (one per character placed, one per relationship); the limit is {MAX_SAMPLING_TERMS}"
        in (record["error"])
    )


def test_a_plan_at_the_sampling_bound_is_sampled(tmp_path: Path) -> None:
    relationships = ["in front of fridge_1"] * (MAX_SAMPLING_TERMS - 1)
    body = (
        f"t = get_character('Theodore')\nt.set_position(Area({relationships!r}))\nt.set_target_action('idle')\n"
        "return [t]"
    )
    record = _pi_program_run(tmp_path, body)
    assert record["status"] in ("passed", "failed"), record
    assert len(record["plan"]["Theodore"]["sampled_position"]) == 2
