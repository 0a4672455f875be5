"""A result line can never fail on its content, and a record that fails anyway becomes `internal_error`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from edsb.results import ErrorKind, RunResult, RunStatus
from edsb.results.rundir import ResultStore, read_results


def _result(**fields: object) -> RunResult:
    values: dict[str, object] = {"key": "ours/tc01-d0-r0", "variant": "ours", "case": 1, "distraction": 0}
    values["sandbox"] = "exact"
    return RunResult.model_validate(values | {"status": RunStatus.ERROR, "error_kind": ErrorKind.CODE_RUNTIME} | fields)


def test_a_record_holding_lone_surrogates_is_written_repaired_and_says_so() -> None:
    """Text is cleaned where it enters; this is the net under that, for text that slipped through."""
    result = _result(
        error="code_runtime: \ud800", plan={"\udfff": {"target_action": ["\udc00"]}}, surrogates_replaced=["code"]
    )
    line = result.to_line()
    record = json.loads(line.decode("utf-8"))
    assert record["error"] == "code_runtime: \ufffd"
    assert record["plan"] == {"\ufffd": {"target_action": ["\ufffd"]}}
    assert record["surrogates_replaced"] == ["code", "record"]
    assert b"\\ud" not in line


def test_the_store_records_a_run_it_cannot_serialise_as_internal_error(tmp_path: Path) -> None:
    def transcript_fails(result: RunResult) -> None:
        raise ValueError("cannot serialise the transcript")

    store = ResultStore(tmp_path, before_line=transcript_fails)
    store.open()
    written = asyncio.run(store.commit(_result(plan={"David": {}})))
    store.close()
    assert (written.status, written.error_kind, written.plan) == (RunStatus.INCOMPLETE, ErrorKind.INTERNAL_ERROR, None)
    assert written.error == (
        "internal_error: the result could not be written (ValueError: cannot serialise the transcript). "
        "This is a bug of edsb, not the model's error: please report it."
    )
    assert read_results(tmp_path / "results.jsonl")[0] == [written]
