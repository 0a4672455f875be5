"""`edsb sandbox check`: which sandbox this host gets and why, and the self-test of its attacks."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

import pytest

from edsb.sandbox.kernel import PROBE_ENV
from edsb.sandbox.selfcheck import SELF_CHECK
from tests.support.edsb_cli import Outcome
from tests.support.kernel_sandbox import require_kernel_sandbox

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the kernel sandbox is Linux's"),
    pytest.mark.usefixtures("fresh_probe"),  # every test sees this host's probe, unset and fresh
]


def test_every_attack_is_refused_here(edsb: Callable[..., Outcome]) -> None:
    require_kernel_sandbox()
    outcome = edsb("sandbox", "check")
    assert outcome.returncode == 0, outcome.stdout
    lines = outcome.stdout.splitlines()
    assert lines[0].startswith("sandbox: exact")
    assert sum(line.startswith("  ok   ") for line in lines) == len(SELF_CHECK) + 1  # and the honest run
    assert "FAIL" not in outcome.stdout and lines[-1] == "result: every attack refused"
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    for word in (
        "kernel: Linux",
        "Landlock: ABI",
        "seccomp: usable",
        "user: ",
        "privilege drop: ",
        "threads: ",
        "file view: ",
    ):
        assert word in outcome.stdout


def test_json_for_jq(edsb: Callable[..., Outcome]) -> None:
    require_kernel_sandbox()
    outcome = edsb("sandbox", "check", "--json")
    report = json.loads(outcome.stdout)
    assert outcome.returncode == 0 and report["passed"] is True
    assert report["host"]["exact"] is True and report["host"]["landlock_abi"] >= 3
    assert len(report["self_test"]) == len(SELF_CHECK) + 1 == 20
    assert all(entry["passed"] and entry["status"] in ("refused", "done") for entry in report["self_test"])


def test_a_host_without_landlock_is_told_so_and_fails(
    edsb: Callable[..., Outcome], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PROBE_ENV, "no-landlock")
    outcome = edsb("sandbox", "check")
    assert outcome.returncode == 1
    assert outcome.stdout.startswith("sandbox: restricted")
    assert "Landlock: none (reported missing" in outcome.stdout and "FAIL read /etc/passwd" in outcome.stdout


def test_bad_usage_is_exit_2(edsb: Callable[..., Outcome]) -> None:
    edsb("sandbox", "check", "--no-such-option").assert_one_clear_error(2, contains="--no-such-option")
