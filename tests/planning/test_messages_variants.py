"""The variant table and the presets agree with what the prompt pack can actually render
(docs/reference.md#planning-settings, #impossible-combinations)."""

from __future__ import annotations

import dataclasses

import pytest

from edsb.data.benchmark import Benchmark
from edsb.data.selection import select_cases
from edsb.errors import UsageError
from edsb.planning.messages import UnsupportedVariantError, narrator_request, parser_request
from edsb.planning.narrator import make_event
from edsb.planning.prompt_pack import load_prompt_pack
from edsb.planning.scenario import build_scenario
from edsb.planning.variants import PRESETS, VARIANTS, get_preset, get_variant


def test_variant_table() -> None:
    assert list(VARIANTS) == ["ours", "wo-event", "object-list", "scene-graph", "direct"]
    assert {v.name: v.folder_suffix for v in VARIANTS.values()} == {
        "ours": "narrative-event",
        "wo-event": "narrative-no_event",
        "object-list": "object_list-event",
        "scene-graph": "scene_graph-event",
        "direct": "scene_graph-event_no_lcps",
    }
    assert [v.name for v in VARIANTS.values() if v.narrator.json_mode] == [
        "ours",
        "object-list",
        "scene-graph",
        "direct",
    ]
    assert not any(v.parser.json_mode for v in VARIANTS.values() if v.parser)
    assert [v.name for v in VARIANTS.values() if not v.uses_event_parser] == ["wo-event"]
    assert [v.name for v in VARIANTS.values() if not v.samples_positions] == ["direct"]
    assert get_variant("wo_event") is VARIANTS["wo-event"] and get_variant(" Scene_Graph ") is VARIANTS["scene-graph"]
    with pytest.raises(UsageError):
        get_variant("oracle")
    with pytest.raises(UsageError):
        get_preset("table3")


def test_unsupported_reason() -> None:
    assert VARIANTS["wo-event"].unsupported_reason(["PI"]) is not None
    assert VARIANTS["wo-event"].unsupported_reason(["OA", "SS"]) is None
    assert VARIANTS["direct"].unsupported_reason(["RC"]) is not None
    assert VARIANTS["direct"].unsupported_reason(["PI"]) is None
    assert all(VARIANTS[n].unsupported_reason(["OA", "RC", "SS", "PI"]) is None for n in ("ours", "scene-graph"))


def _renders(benchmark: Benchmark, case_id: int, variant_name: str) -> bool:
    """Whether both requests of a variant can be built (narrative text stands in for rendered descriptions)."""
    pack = load_prompt_pack(benchmark)
    scenario = build_scenario(benchmark, case_id, 0, 0, "ours")
    scenario = dataclasses.replace(scenario, variant=get_variant(variant_name))
    event = make_event(scenario.character_names[:1], "do something")
    try:
        narrator_request(scenario, pack)
        if scenario.variant.uses_event_parser:
            parser_request(scenario, pack, event)
    except UnsupportedVariantError:
        return False
    return True


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_table_agrees_with_the_prompt_pack(benchmark: Benchmark, variant: str) -> None:
    for case_id, case in benchmark.cases.items():
        supported = VARIANTS[variant].unsupported_reason(case.tags) is None
        assert _renders(benchmark, case_id, variant) == supported, case_id


def test_presets_avoid_unsupported_runs(benchmark: Benchmark) -> None:
    runs = {}
    for preset in PRESETS.values():
        case_ids = select_cases(preset.cases, benchmark.cases)
        for variant in preset.variants:
            for case_id in case_ids:
                assert get_variant(variant).unsupported_reason(benchmark.case(case_id).tags) is None
        levels = sum(level <= benchmark.case(c).max_distraction for c in case_ids for level in preset.levels)
        runs[preset.name] = levels * preset.repeats * len(preset.variants)
    assert runs == {"table1": 1800, "table2": 100}  # docs/reference.md#run-order
