"""Parity through the real pipeline: the programs of `test_sandbox_parity` as Event Parser answers of one `edsb run`
per sandbox (scripted loopback model, fresh sandbox children, real judge, real result store).

The exact sandbox must give the reference's outcome on every program: the corpus programs all set David's plan for
case 13 (the run passes) but "typing import", which fails as the reference's executor fails; the House replies whose
reference outcome is an exception fail with the reference's exception text. The restricted sandbox's differences
from it are recorded as they are: `RESTRICTED_DIFFERS` lists the programs where its record differs, exactly, so a
construct that moves between "runs" and "refused" shows here (and in the count of docs/known-issues.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.test_sandbox_parity import CORPUS, CORPUS_REFERENCE_ERRORS, REPLIES, RUNS
from tests.support.data import require_data
from tests.support.edsb_cli import child_env, edsb_child
from tests.support.kernel_sandbox import require_kernel_sandbox
from tests.support.openai_server import OpenAIServer
from tests.support.run_dir import read_results
from tests.support.scripted_programs import ProgramScript, programs_by_run, run_args

PLAN = {"David": {"target_action": ["eat", "sit"], "relationships": ["sit on chair_2"]}}
FENCE = "```python\n"


def slug(name: str) -> str:
    return re.sub(r"\W+", "-", name).strip("-")


def labelled(name: str, reply: str) -> str:
    """The reply with a marker comment as its code's last line (read back from the transcripts; last, so that the
    line numbers of a syntax error stay the reference's)."""
    end = reply.index("\n```", reply.index(FENCE))
    return f"{reply[:end]}\n# program: {name}{reply[end:]}"


#: The corpus, and the House replies whose reference outcome is an exception (the others plan for characters case
#: 13 does not have, and are judged against it rather than compared): program name → (reply, expected record).
PROGRAMS: dict[str, tuple[str, str]] = {
    **{f"corpus-{slug(name)}": (reply, CORPUS_REFERENCE_ERRORS.get(name, RUNS)) for name, (reply, _) in CORPUS.items()},
    **{
        f"reply-{slug(name)}": (reply.text, reply.reference)
        for name, reply in REPLIES.items()
        if reply.scene == "House" and isinstance(reply.reference, str) and FENCE in reply.text
    },
}

#: Where the restricted sandbox's record differs from the exact one's (and so from the reference), as measured: its
#: error kind, and for the two replies where only the wording differs (same kind as exact), its message.
RESTRICTED_DIFFERS: dict[str, tuple[str, str | None]] = {
    "corpus-import-random": ("code_policy", None),
    "corpus-namedtuple": ("code_policy", None),
    "corpus-import-copy": ("code_policy", None),
    "corpus-numpy-random": ("code_policy", None),
    "corpus-dataclass-bound-in-the-reference": ("code_runtime", None),
    "corpus-types-bound-in-the-reference": ("code_runtime", None),
    "corpus-logging-bound-in-the-reference": ("code_runtime", None),
    "corpus-dunder-method": ("code_policy", None),
    "corpus-underscore-helper": ("code_policy", None),
    "corpus-format-index-field": ("code_policy", None),
    "corpus-object-sentinel": ("code_policy", None),
    "reply-llama-self-get_character": ("code_runtime", "AttributeError: 'CodeApi' object has no attribute 'self'"),
    "reply-claude-set_position-with-a-string": (
        "code_runtime",
        "ValueError: set_position expects an Area or a list, not <class 'str'>",
    ),
}


def sweep(sandbox: str, root: Path) -> dict[str, dict]:
    """Program name → its run's record, from one `edsb run --sandbox SANDBOX` over every program."""
    script = [labelled(name, reply) for name, (reply, _) in PROGRAMS.items()]
    out = root / sandbox
    with OpenAIServer(ProgramScript(script)) as server:
        args = run_args(server.base_url, out, len(script), "--concurrency", "2", "--sandbox", sandbox)
        process = edsb_child([*args, "--code-timeout", "5"], env=child_env(root / "cache"))
    assert process.returncode == 0, process.stderr
    names = programs_by_run(out)
    records = {names[record["key"]]: record for record in read_results(out)}
    assert sorted(records) == sorted(PROGRAMS)
    return records


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, dict]]]:
    require_data()
    require_kernel_sandbox()
    root = tmp_path_factory.mktemp("parity")
    yield {sandbox: sweep(sandbox, root) for sandbox in ("exact", "restricted")}


def outcome(record: dict) -> tuple[object, ...]:
    return record["status"], record["error_kind"], record["error"], record["plan"]


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_exact_gives_the_reference_outcome_through_the_pipeline(records: dict[str, dict[str, dict]], name: str) -> None:
    record = records["exact"][name]
    expected = PROGRAMS[name][1]
    assert record["sandbox"] == "exact"
    if expected == RUNS:
        assert (record["status"], record["plan"]) == ("passed", PLAN), record["error"]
        return
    assert record["status"] == "error" and record["error_kind"].startswith("code_"), record
    message = record["error"].split(": ", 1)[1]  # "code_runtime: NameError: ..." → the exception's text
    if expected.startswith("SyntaxError: "):  # CPython's wording changed between 3.10 and 3.11
        assert message.startswith("SyntaxError: ") and message.rsplit(" (", 1)[1] == expected.rsplit(" (", 1)[1]
    else:
        assert message == expected


def test_the_restricted_sandbox_differs_exactly_where_recorded(records: dict[str, dict[str, dict]]) -> None:
    differs = [name for name in PROGRAMS if outcome(records["restricted"][name]) != outcome(records["exact"][name])]
    assert differs == list(RESTRICTED_DIFFERS)
    for name, (kind, message) in RESTRICTED_DIFFERS.items():
        record = records["restricted"][name]
        assert (record["status"], record["error_kind"]) == ("error", kind), record["error"]
        if message is not None:
            assert record["error"] == f"{kind}: {message}"
            assert records["exact"][name]["error_kind"] == kind  # the same verdict, in other words
    assert all(record["sandbox"] == "restricted" for record in records["restricted"].values())


def test_the_corpus_differences_are_the_corpus_refusals() -> None:
    """The corpus part of the list is the in-process test's refusals, with their verdicts, minus "typing import",
    which fails in the reference as well."""
    refused = {
        f"corpus-{slug(name)}": (verdict, None)
        for name, (_, verdict) in CORPUS.items()
        if verdict != RUNS and name != "typing import"
    }
    assert refused == {name: value for name, value in RESTRICTED_DIFFERS.items() if name.startswith("corpus-")}
