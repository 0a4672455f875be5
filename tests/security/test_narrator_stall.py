"""A pathological Narrator reply in one run must not hold up the runs beside it: parsing it once took
49 s on the event loop. Measured as the gap between two requests of the other run in the loopback server's log."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.security.test_hostile_text import PATHOLOGICAL
from tests.support.data import require_data
from tests.support.edsb_cli import child_env, edsb_child
from tests.support.hostile_script import BENIGN_PLAN, BENIGN_PROGRAM, narrator_json
from tests.support.openai_server import OpenAIServer, RecordedRequest, Reply
from tests.support.run_dir import read_results
from tests.support.scripted_programs import is_narrator_request, run_args

OTHER_DELAY_S = 0.5  # the other run's Narrator answers this late, so its next request comes while the first parses


class OneStallingReply:
    """The first Narrator request gets the pathological activity at once, the second a valid event late."""

    def __init__(self) -> None:
        self.narrator_requests: list[RecordedRequest] = []
        self.lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        if not is_narrator_request(request):
            return Reply.completion(BENIGN_PROGRAM)
        with self.lock:
            self.narrator_requests.append(request)
            first = len(self.narrator_requests) == 1
        if first:
            return Reply.completion(narrator_json("stalling", PATHOLOGICAL))
        return Reply.completion(narrator_json("other"), delay_s=OTHER_DELAY_S)


def test_a_pathological_narrator_reply_does_not_delay_a_concurrent_run(tmp_path: Path) -> None:
    require_data()
    model = OneStallingReply()
    with OpenAIServer(model) as server:
        args = run_args(server.base_url, tmp_path / "run", 2, "--concurrency", "2")
        process = edsb_child(args, env=child_env(tmp_path / "cache"), cwd=tmp_path)
        requests = server.chat_requests
    assert process.returncode == 0, process.stderr[-3000:]
    assert len(requests) == 4 and len(model.narrator_requests) == 2
    other_narrator = model.narrator_requests[1]
    parser_requests = [r for r in requests if not is_narrator_request(r)]
    (other_parser,) = [r for r in parser_requests if b"Ryan texts" not in r.body]
    (stalling_parser,) = [r for r in parser_requests if b"Ryan texts" in r.body]
    # The other run's Event Parser request follows its Narrator answer at once, however long the first run's reply.
    gap = other_parser.received_at - other_narrator.received_at - OTHER_DELAY_S
    assert gap < 1.0, f"the other run waited {gap:.1f} s longer than its own model"
    assert stalling_parser.received_at < other_parser.received_at  # the stalling reply was parsed first
    results = read_results(tmp_path / "run")
    assert [(r["status"], r["plan"]) for r in results] == [("passed", BENIGN_PLAN)] * 2
