"""Request structure beyond the hashes: example selection, example answers, the null-plan line, JSON mode."""

from __future__ import annotations

import dataclasses
import json

import pytest

from edsb.data.benchmark import Benchmark
from edsb.planning.messages import (
    UnsupportedVariantError,
    narrator_query,
    narrator_request,
    parser_query,
    parser_request,
)
from edsb.planning.narrator import make_event
from edsb.planning.prompt_pack import (
    NULL_PLAN_GUIDELINE,
    PromptPack,
    guideline_from_runner,
    load_prompt_pack,
    null_plan_guideline,
)
from edsb.planning.scenario import Character, HistoryEvent, PlannedDetails, build_scenario
from edsb.planning.variants import get_variant
from tests.support.data import DATA


def test_prompt_pack_is_loaded_once_per_directory(benchmark: Benchmark, pack: PromptPack) -> None:
    assert load_prompt_pack(Benchmark.open(DATA)) is pack
    assert [e.stem for e in pack.narrator_examples] == ["OA", "PI", "RC", "SS"]
    assert [e.stem for e in pack.examples("event_parser", ["SS", "OA"])] == ["OA", "SS"]
    assert pack.narrator_examples[1].response_wo_event is None  # PI has no w/o Event answer
    assert [e.stem for e in pack.parser_examples if e.response_wo_lcps] == ["PI"]


def test_examples_follow_the_case_tags_in_file_order(benchmark: Benchmark, pack: PromptPack) -> None:
    scenario = build_scenario(benchmark, 30, 0, 0, "ours")  # OA + RC
    request = narrator_request(scenario, pack)
    assert [m["role"] for m in request.messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    oa, rc = pack.examples("narrator", ["OA", "RC"])
    assert request.messages[1]["content"].startswith(
        "[Scene Description]\n" + pack.sample_description(oa.scene_name, "narrative")
    )
    assert request.messages[3]["content"].startswith(
        "[Scene Description]\n" + pack.sample_description(rc.scene_name, "narrative")
    )
    assert request.json_mode


def test_narrator_example_answer_is_one_line_reasoning_json(benchmark: Benchmark, pack: PromptPack) -> None:
    request = narrator_request(build_scenario(benchmark, 20, 0, 0, "ours"), pack)  # SS: a two-character answer
    answer = request.messages[2]["content"]
    data = json.loads(answer)
    example = pack.examples("narrator", ["SS"])[0]
    assert data["event"] == {"characters": example.response.characters, "activity": example.response.activity}
    assert "\n" not in data["reasoning"] and "event/plan" not in data["reasoning"]
    assert data["reasoning"] == data["reasoning"].strip()
    assert '    "event": {\n        "characters": ["James", "Sara"],\n        "activity": ' in answer


def test_example_user_turn_uses_the_live_query_layout(benchmark: Benchmark, pack: PromptPack) -> None:
    request = narrator_request(build_scenario(benchmark, 20, 0, 0, "ours"), pack)
    example_query = request.messages[1]["content"]
    assert "[Available Characters]\n- James\n- Sara\n\n[Event History]\n- Event 0: [Sara]" in example_query
    assert example_query.endswith("(completed)\n\n[Feedback]\nNone")


def test_query_sections() -> None:
    ann = Character("Ann", "idle", ("eat", "sit"), ("sit on chair_1", "look at Bob"))
    bob = Character("Bob", "interacting", ("chat",), ("adjacent to table_1",), current_event=0)
    history = [HistoryEvent(("Bob",), "chats", "ongoing", {"Bob": PlannedDetails(("chat",), ("close to x_1",))})]
    query = narrator_query("  a room  \n", ["idle", "eat"], None, [ann, bob], history)
    assert query == (
        "[Scene Description]\n  a room\n\n[Available Activities]\n['idle', 'eat']\n\n[User Instruction]\nNone\n\n"
        "[Available Characters]\n- Ann\n\n[Event History]\n- Event 0: [Bob] chats (ongoing)\n\n[Feedback]\nNone"
    )
    assert narrator_query("d", [], "go\n", [], []).endswith(
        "[User Instruction]\ngo\n\n[Available Characters]\n\n[Event History]\nNone\n\n[Feedback]\nNone"
    )
    query = parser_query("d", ["eat"], [ann, bob], make_event(["Ann"], "eats.").label)
    assert query == (
        "[Scene Description]\nd\n\n[Available Action Labels]\n['eat']\n\n[Current States of Characters]\n"
        "- Ann:\n  - state: 'idle'\n  - current_action: 'eat'\n  - relationships: ['sit on chair_1', 'look at Bob']\n"
        "- Bob:\n  - state: 'interacting'\n  - current_action: 'chat'\n  - relationships: ['adjacent to table_1']\n\n"
        "[Event to Parse]\n[Ann] eats\n\n[Feedback]\nNone"
    )


def test_planning_history_query_for_wo_event(benchmark: Benchmark, pack: PromptPack) -> None:
    scenario = build_scenario(benchmark, 51, 0, 0, "wo-event")
    request = narrator_request(scenario, pack)
    assert not request.json_mode
    assert "[Planning History]\n- Plan 0:\n  - Kathryn:\n    - target_action: 'chat'\n" in request.query
    assert "    - state: 'completed'\n  - Christopher:" in request.query
    assert "[Event History]" not in request.query
    assert request.messages[2]["content"].startswith("```python\ndef generate_next_plan():")


def test_null_plan_guideline_only_for_case_21(benchmark: Benchmark, pack: PromptPack) -> None:
    plain = narrator_request(build_scenario(benchmark, 20, 0, 0, "ours"), pack).messages[0]["content"]
    assert plain == pack.system_texts["narrator"]
    system = narrator_request(build_scenario(benchmark, 21, 0, 0, "ours"), pack).messages[0]["content"]
    assert system == plain + "\n" + pack.null_plan_guideline("event")
    system = narrator_request(build_scenario(benchmark, 21, 1, 0, "wo-event"), pack).messages[0]["content"]
    assert system == pack.system_texts["narrator_wo_event"] + "\n" + pack.null_plan_guideline("no_event")
    assert "event" not in null_plan_guideline("no_event") and "plan" in null_plan_guideline("no_event")


def test_parser_request(benchmark: Benchmark, pack: PromptPack) -> None:
    scenario = build_scenario(benchmark, 44, 2, 0, "ours")
    request = parser_request(scenario, pack, make_event(["Kimberly", "Jason"], "sit down together."))
    assert not request.json_mode and request.module == "event_parser"
    assert request.messages[0]["content"] == pack.system_texts["event_parser"]
    assert len(request.messages) == 6  # OA and SS examples
    assert request.messages[2]["content"].startswith("```python\ndef parse_event():")
    assert "[Event to Parse]\n[Kimberly, Jason] sit down together\n\n[Feedback]\nNone" in request.query
    assert "[Event History]" not in request.query


def test_unsupported_combinations_raise_a_run_error(benchmark: Benchmark, pack: PromptPack) -> None:
    with pytest.raises(UnsupportedVariantError) as caught:
        narrator_request(build_scenario(benchmark, 60, 0, 0, "wo-event"), pack)
    assert caught.value.kind == "unsupported_variant"
    # Direct Inference on an OA case (narrative description kept, no geometry needed): the parser has no OA answer.
    scenario = dataclasses.replace(build_scenario(benchmark, 0, 0, 0, "ours"), variant=get_variant("direct"))
    assert len(narrator_request(scenario, pack).messages) == 4
    with pytest.raises(UnsupportedVariantError):
        parser_request(scenario, pack, make_event(["Ryan"], "wave"))
    with pytest.raises(ValueError):
        parser_request(build_scenario(benchmark, 0, 0, 0, "wo-event"), pack, make_event(["Ryan"], "wave"))


def test_guideline_is_read_from_runner_source_without_running_it() -> None:
    source = (
        "import sys\n"
        "sys.exit('never executed')\n"
        "def setup(self, case):\n"
        "    if case['allow_null_plan']:\n"
        "        self.narrator.additional_guidelines += '- First sentence about an empty event.'\n"
        "        self.narrator.additional_guidelines += ' Second sentence.'\n"
        "        self.narrator.other_field += 'ignored'\n"
    )
    text = guideline_from_runner(source)
    assert text == "- First sentence about an empty event. Second sentence."
    assert null_plan_guideline("no_event", text) == "- First sentence about an empty plan. Second sentence."
    assert guideline_from_runner("def broken(:") is None
    assert guideline_from_runner("x = 1") is None


def test_without_the_runner_file_our_own_wording_is_used(pack: PromptPack) -> None:
    if (pack.root / "benchmark" / "runner.py").exists():
        pytest.skip("this data directory carries the reference runner file")
    assert (pack.null_plan_source, pack.null_plan_text) == ("edsb", NULL_PLAN_GUIDELINE)
