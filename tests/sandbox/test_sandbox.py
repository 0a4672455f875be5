"""Model code through the real sandbox: the official example programs, and the reference's verdicts
(docs/reference.md#code-execution, #code-extraction).

The example programs are read from the data dir at test time. Their scenes ship only as sample descriptions, so the
API runs on the scene graph those descriptions print (the reference's graph, in its listing order) and on boxes
rebuilt from their positions and sizes (used only for `get_closest_object`).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from edsb.data.benchmark import Benchmark
from edsb.data.models import GridSettings, SceneObjectRecord
from edsb.geometry.boxes import Box
from edsb.geometry.relations import split_anchor
from edsb.geometry.scene import build_scene, load_scene
from edsb.geometry.scene_graph import Edge, SceneGraph
from edsb.planning.plans import run_plan_code
from edsb.planning.prompt_pack import PromptPack
from edsb.planning.scenario import cast_and_history, latest_plans
from edsb.sandbox import (
    ApiScene,
    CodeApi,
    CodeContext,
    CodeError,
    LatestPlan,
    SandboxError,
    SandboxLimits,
    SandboxPool,
    execute_plan_code,
)

LIMITS = SandboxLimits(timeout=5.0, workers=2)


def run(reply: str, context: CodeContext, mode="event"):
    return run_plan_code(reply, context, mode, LIMITS)


def failure(reply: str, context: CodeContext, mode="event") -> tuple[str, str]:
    with pytest.raises(CodeError) as caught:
        run(reply, context, mode)
    return caught.value.kind, caught.value.message


# --- the official examples --------------------------------------------------------------------------------------------


def example_scene(pack: PromptPack, scene_name: str) -> ApiScene:
    """An example scene from its scene-graph description: printed edges as the graph, boxes from the numbers."""
    described = json.loads(pack.sample_description(scene_name, "scene_graph"))
    records = []
    for index, (name, fields) in enumerate(described.items()):
        label, idx = name.rsplit("_", 1)
        (cx, cy, cz), (sx, sy, sz) = fields["position"], fields["size"]
        fx, fy, _ = fields.get("orientation", [0.0, 1.0, 0.0])
        norm = (fx * fx + fy * fy) ** 0.5
        fx, fy = fx / norm, fy / norm
        width, depth = (sx, sy) if abs(fy) >= abs(fx) else (sy, sx)
        corners = [
            (cx + a * fy * width / 2 + b * fx * depth / 2, cy - a * fx * width / 2 + b * fy * depth / 2)
            for a, b in ((-1, -1), (1, -1), (1, 1), (-1, 1))
        ]
        bbox = [[x, y, cz - sz / 2] for x, y in corners] + [[x, y, cz + sz / 2] for x, y in corners]
        records.append(
            SceneObjectRecord(
                id=index,
                label=label,
                idx=int(idx),
                aa_extents=[sx, sy, sz],
                orientation=[fx, fy, 0.0],
                has_orientation="orientation" in fields,
                width=width,
                depth=depth,
                height=sz,
                center=[cx, cy, cz],
                bbox=bbox,
                sit_offset_horizontal=0.0,
                sit_offset_vertical=0.0,
            )
        )
    grid = GridSettings(
        grid_step=0.3,
        x_margin=0.0,
        y_margin=0.0,
        z_margin=0.0,
        cylinder_radius=0.3,
        cylinder_height=0.6,
        user_modifications={},
    )
    scene = build_scene(scene_name, [Box.from_record(r) for r in records], [[0, 0, 0], [10, 10, 3]], grid)
    edges = [
        Edge(name, *reversed(split_anchor(relationship)))
        for name, fields in described.items()
        for relationship in fields.get("relationships", [])
    ]
    return ApiScene(scene, SceneGraph(described, edges))


def example_context(pack: PromptPack, example) -> CodeContext:
    _, history = cast_and_history(
        example.characters, example.previous_events, add_postures=False, names_from_cast=False
    )
    return CodeContext.create(example_scene(pack, example.scene_name), latest_plans(history))


def seated(action: str, seat: str, *extra: str) -> dict:
    return {"target_action": [action, "sit"], "relationships": [f"sit on {seat}", *extra]}


EXPECTED_PARSER_PLANS = {  # what each example's comments say its program computes
    "OA": {"David": seated("drink", "sofa_2")},
    "PI": {"James": {"target_action": ["idle"], "relationships": ["between sofa_1 and sofa_2"]}},
    "RC": {"Alice": seated("chat", "chair_2", "look at Bella"), "Bella": seated("chat", "chair_3", "look at Alice")},
    "SS": {"Sara": seated("eat", "chair_2")},
}


@pytest.mark.parametrize("stem", sorted(EXPECTED_PARSER_PLANS))
def test_event_parser_examples_run_as_their_comments_say(pack: PromptPack, stem: str) -> None:
    [example] = pack.examples("event_parser", [stem])
    assert run(example.response, example_context(pack, example)) == EXPECTED_PARSER_PLANS[stem]


def test_direct_inference_example_writes_coordinates(pack: PromptPack) -> None:
    [example] = pack.examples("event_parser", ["PI"])
    plan = run(example.response_wo_lcps, example_context(pack, example), "event_no_lcps")
    assert plan == {"James": {"target_action": ["idle"], "relationships": [], "sampled_position": [2.17, 3.61]}}


@pytest.mark.parametrize("stem", ["OA", "RC", "SS"])
def test_wo_event_examples_plan_through_generate_next_plan(pack: PromptPack, stem: str) -> None:
    [narration] = pack.examples("narrator", [stem])
    [parser_example] = pack.examples("event_parser", [stem])  # same scene and history
    assert narration.scene_name == parser_example.scene_name
    plan = run(narration.response_wo_event, example_context(pack, parser_example), "no_event")
    expected = dict(EXPECTED_PARSER_PLANS[stem])
    if stem == "SS":  # this answer also seats James, on the chair he already occupies
        expected = {"James": seated("eat", "chair_1"), **expected}
    assert plan == expected


# --- the reference's verdicts -----------------------------------------------------------------------------------------


def test_prose_without_a_python_block_is_a_syntax_error(house: CodeContext) -> None:
    kind, message = failure("I would seat Ryan on chair_1.", house)
    assert kind == "code_syntax" and message.startswith("SyntaxError: ")


def test_entry_point_must_be_rewritable(house: CodeContext) -> None:
    assert failure("x = 1", house) == ("code_no_entry", "NameError: name 'parse_event' is not defined")
    assert failure("def parse_event() -> None:\n    pass", house) == (
        "code_no_entry",
        "TypeError: parse_event() takes 0 positional arguments but 1 was given",
    )
    assert failure("parse_event = 3", house) == ("code_no_entry", "TypeError: first argument must be callable")
    kind, _ = failure("def generate_next_plan(self):\n    pass", house)  # not rewritten: no parse_event
    assert kind == "code_no_entry"
    # Signatures that accept `self` work, written by hand or not.
    assert run("def parse_event(self):\n    get_character('A').set_target_action('idle')", house) == {
        "A": {"target_action": ["idle"], "relationships": []}
    }


def test_top_level_definitions_are_invisible_inside_the_entry_point(house: CodeContext) -> None:
    helper = "def pick():\n    return 'chair_1'\n\ndef parse_event():\n    get_character('A').set_position(pick())\n"
    assert failure(helper, house) == ("code_runtime", "NameError: name 'pick' is not defined")
    # Top-level code itself may call the API (it sees `self`), and its effects count.
    top = "get_character('A').set_target_action('idle')\ndef parse_event():\n    pass\n"
    assert run(top, house) == {"A": {"target_action": ["idle"], "relationships": []}}


def test_rewrite_side_effects_become_errors(house: CodeContext) -> None:
    mangled = "def get_closest_object_near(x):\n    return x\ndef parse_event():\n    pass\n"
    assert failure(mangled, house)[0] == "code_syntax"
    kind, message = failure("def parse_event():\n    self.get_character('A')\n", house)
    assert kind == "code_runtime" and message.startswith("AttributeError: ") and "'self'" in message
    assert failure("def parse_event():\n    my_get_character('A')\n", house) == (
        "code_runtime",
        "NameError: name 'my_self' is not defined",
    )


def test_api_errors_keep_their_class_and_message(house: CodeContext) -> None:
    assert failure("def parse_event():\n    get_closest_object('chair_99')", house) == (
        "code_runtime",
        "KeyError: 'chair_99'",
    )
    assert failure("def parse_event():\n    get_objects_in_front_of('chair_99')", house) == (
        "code_runtime",
        "AssertionError: chair_99 is not an object in the scene",
    )
    handle = "def parse_event():\n    get_closest_object(get_object_supporting('toaster_1'))"
    assert failure(handle, house) == ("code_runtime", "KeyError: table_4")
    kind, message = failure("def parse_event():\n    get_character('A').set_position('sit on chair_1')", house)
    assert kind == "code_runtime" and message.startswith("ValueError: ")


def test_conversion_failures_are_plan_errors(house: CodeContext) -> None:
    tuple_position = "def parse_event():\n    get_character('A').set_position(('close to table_1',))"
    assert run(tuple_position, house)["A"]["relationships"] == ["close to table_1"]
    assert failure(tuple_position, house, "no_event")[0] == "code_plan"
    assert failure(tuple_position, house, "event_no_lcps") == (
        "code_plan",
        "AttributeError: 'tuple' object has no attribute 'copy'",
    )
    areas = "def parse_event():\n    get_character('A').set_position([get_area_to_sit_on('chair_1')])"
    assert failure(areas, house)[1] == "AttributeError: 'Area' object has no attribute 'startswith'"


def test_everyday_python_works(house: CodeContext) -> None:
    code = """
def parse_event():
    counts = {}
    for chair in get_objects_close_to("table_3") + ["chair_1"]:
        counts.setdefault(chair, 0)
        counts[chair] += 1
    best = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    free = [c for c in ["chair_1", "chair_3"] if not is_object_occupied(c)]
    ryan = get_character("Ryan")
    ryan.set_position(get_intersected_area(get_area_close_to(best), get_area_to_sit_on(free[0])))
    ryan.set_orientation(get_object_supporting("toaster_1"))
    ryan.set_target_action(f"{'use'}_smartphone")
    print("chose", best, free)
    return [ryan]
"""
    raw = execute_plan_code(code, house, LIMITS)
    assert raw.output == "chose chair_1 ['chair_1', 'chair_3']\n"
    [ryan] = raw.characters
    assert ryan.position == ["close to chair_1", "sit on chair_1"]
    assert ryan.orientation == ("look at table_4",)
    assert ryan.target_action == "use_smartphone"


def test_pure_modules_can_be_imported_inside_the_entry_point(house: CodeContext) -> None:
    # The reference's exec allows any import and exposes `re`; plan code may use math, re and itertools here.
    code = """
def parse_event():
    import math
    from itertools import combinations
    pairs = list(combinations(["chair_1", "chair_3", "chair_4"], 2))
    gaps = {pair: get_distance_between(*pair) for pair in pairs}
    closest = min(gaps, key=gaps.get)
    digits = re.findall(r"[0-9]+", closest[0])
    print(len(pairs), math.isfinite(gaps[closest]), digits)
    ryan = get_character("Ryan")
    ryan.set_position(get_area_between(*closest))
    ryan.set_target_action("use_smartphone")
"""
    raw = execute_plan_code(code, house, LIMITS)
    assert raw.output == "3 True ['1']\n"
    assert raw.characters[0].position[0].startswith("between chair_1 and ")


@pytest.mark.parametrize(
    ("body", "kind", "text"),
    [
        ("    import os", "code_policy", "import statements are not allowed"),
        ("    import math, os", "code_policy", "import statements are not allowed"),
        ("    from re import *", "code_syntax", "import *"),  # a SyntaxError inside a function, as in CPython
        ("    import numpy.random", "code_policy", "import statements are not allowed"),
        ("    return re.enum", "code_policy", "re.enum is not available"),  # module attributes are not handed over
        ("    import math\n    return math.sys", "code_runtime", "AttributeError"),
        ("    return getattr(re.compile('a'), 'pattern')", None, None),
    ],
    ids=["os", "os-beside-math", "star", "numpy-random", "re-enum", "math-sys", "pattern-ok"],
)
def test_imports_reach_pure_functions_only(house: CodeContext, body: str, kind: str | None, text: str | None) -> None:
    code = f"def parse_event():\n{body}\n"
    if kind is None:
        assert execute_plan_code(code, house, LIMITS).characters == ()
        return
    assert failure(code, house)[0] == kind
    assert text in failure(code, house)[1]


def test_a_top_level_import_is_invisible_inside_the_entry_point(house: CodeContext) -> None:
    # As in the reference, where names bound at top level do not reach the function's globals.
    code = "import math\ndef parse_event():\n    return math.sqrt(4)\n"
    assert failure(code, house) == ("code_runtime", "NameError: name 'math' is not defined")


def test_constructs_restrictedpython_refuses_without_a_security_reason_are_allowed(house: CodeContext) -> None:
    code = """
def parse_event():
    seat: str = get_closest_object("table_1", label="chair")
    picked: list
    count = 0
    def bump():
        nonlocal count
        count += 1
    bump()
    tally = {seat: 0}
    tally[seat] += 2
    print(seat, count, tally)
"""
    assert execute_plan_code(code, house, LIMITS).output == "chair_1 1 {'chair_1': 2}\n"


def test_generator_entry_point_sets_nothing(house: CodeContext) -> None:
    assert run("def parse_event():\n    get_character('A').set_target_action('x')\n    yield 1", house) == {}


def test_occupancy_reads_the_latest_plans(benchmark: Benchmark) -> None:
    plans = {"Ann": LatestPlan("eat", ("sit on chair_1",), "completed")}
    context = CodeContext.for_benchmark(benchmark.root, "House", plans)
    code = "def parse_event():\n    get_character('B').set_target_action(str(is_object_occupied('chair_1')))"
    assert run(code, context)["B"]["target_action"] == ["True"]


def test_concurrent_calls_from_threads(benchmark: Benchmark, house: CodeContext) -> None:
    expected_seat = CodeApi(ApiScene(load_scene(benchmark, "House"))).get_closest_object("table_1")
    results: dict[int, object] = {}

    def call(i: int) -> None:
        code = f"def parse_event():\n    get_character('C{i}').set_target_action(get_closest_object('table_1'))"
        try:
            results[i] = run(code, house)
        except Exception as exc:  # reported below
            results[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert results == {i: {f"C{i}": {"target_action": [expected_seat], "relationships": []}} for i in range(12)}


def test_a_pool_can_be_closed_and_reports_missing_scenes(benchmark: Benchmark) -> None:
    with SandboxPool(SandboxLimits(timeout=5.0, workers=1)) as pool:
        assert (
            pool.execute("def parse_event():\n    pass", CodeContext.for_benchmark(benchmark.root, "Office")).characters
            == ()
        )
        with pytest.raises(SandboxError, match="cannot load the scene"):
            pool.execute("def parse_event():\n    pass", CodeContext.for_benchmark(benchmark.root, "Castle"))
    with pytest.raises(SandboxError, match="closed"):
        pool.execute("def parse_event():\n    pass", CodeContext.for_benchmark(benchmark.root, "Office"))


def wait_until_dead(pid: int) -> None:
    """Until the killed child is a zombie (the template reaps it only when the pool asks)."""
    for _ in range(500):
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return
        time.sleep(0.01)
    pytest.fail(f"child {pid} did not die")


def test_a_child_that_died_while_idle_is_replaced(benchmark: Benchmark) -> None:
    context = CodeContext.for_benchmark(benchmark.root, "House")
    with SandboxPool(SandboxLimits(timeout=5.0, workers=1)) as pool:
        pool.warm_up()
        [child] = pool._idle
        os.kill(child.pid, signal.SIGKILL)
        wait_until_dead(child.pid)
        raw = pool.execute("def parse_event():\n    get_character('A').set_target_action('idle')", context)
        assert [c.character for c in raw.characters] == ["A"]
        pool.warm_up()
        assert [c.pid for c in pool._idle] != [child.pid]
