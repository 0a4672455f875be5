"""`edsb run --model local`: the embedded SmolLM2 plans a seat case at three levels and a PI case, with the network
cut off. Whatever the tiny model scores, the run must finish and account for every key. Takes a few minutes."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from edsb.llm import bundled_gguf_path
from tests.support.edsb_cli import run_edsb
from tests.support.network import NetworkBlocked, block_network
from tests.support.run_dir import read_results, read_summary, transcript_records


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_local_model_run_completes_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    offline = block_network(monkeypatch, allow_loopback=True)
    with pytest.raises(NetworkBlocked):  # the guard is live
        socket.create_connection(("192.0.2.1", 80), timeout=1)
    offline.clear()
    out = tmp_path / "run"

    code = run_edsb("run", "--model", "local", "--cases", "13,60", "--repeats", "1", "--out", str(out), "--quiet")

    assert code == 0
    assert offline == []  # nothing tried to leave the machine
    records = read_results(out)
    assert sorted(r["key"] for r in records) == [
        "ours/tc13-d0-r0",
        "ours/tc13-d1-r0",
        "ours/tc13-d2-r0",
        "ours/tc60-d0-r0",
    ]
    transcribed = {line["run"] for line in transcript_records(out)}
    for record in records:
        assert record["status"] in {"passed", "failed", "error"}, record["error"]
        assert record["passed"] == (record["status"] == "passed")
        assert (record["error_kind"] is None) == (record["status"] != "error")
        assert record["model"] == bundled_gguf_path().stem
        assert record["tokens"]["narrator"]["prompt"] > 0  # the model was really asked
        assert record["key"].replace("/", "__") in transcribed
    summary = read_summary(out)
    ours = summary["variants"]["ours"]
    assert ours["runs"] == 4 and ours["incomplete"] == 0
    assert 0.0 <= ours["success_rate"] <= 1.0 and 0.0 <= ours["execution_rate"] <= 1.0
    assert ours["success_rate"] == round(sum(r["passed"] for r in records) / 4, 2)
    assert set(ours["by_case"]) == {"13", "60"}
    assert summary["config"]["runs_planned"] == 4
