"""`run_exact`, called in-process on the real scenes with honest programs only (containment is tested where the
kernel layers are): the reference's quirks follow from its rewrite, namespaces and `exec` steps, the constructs the
restricted sandbox refuses run, and the plan is what `parsed_event` holds.

Every program here was also run through the reference's own executor (rms0329/Event-Driven-Storytelling at 8a6f726,
Python 3.10, the same scenes, the same history where one is given), and the expectations are its outcomes, with two
explained exceptions: CPython 3.10 words the helper's syntax error "invalid syntax" where 3.11 says "expected '('",
and where the code writes an orientation string into `parsed_event` itself the reference keeps the string, which its
conversion iterates character by character, as the plan entry here holds it.
"""

from __future__ import annotations

import inspect
import re

import pytest

from edsb.results import ErrorKind
from edsb.sandbox import API_FUNCTIONS, ApiScene, CodeError, LatestPlan
from edsb.sandbox.code_api import PlanEntry, SceneObject
from edsb.sandbox.exact import GLOBAL_NAMES, REFERENCE_MODULE, Area, Character_, CodeExecutor, run_exact
from edsb.sandbox.source import EXACT_PREFIX, extract_code, prepare_code


def fenced(code: str) -> str:
    return f"Here is the plan.\n```python\n{code}```\nThe code above plans the event."


def entries(reply: str, scene: ApiScene, latest: dict[str, LatestPlan] | None = None) -> list[tuple[object, ...]]:
    return [
        (e.character, e.position, e.target_action, e.orientation) for e in run_exact(fenced(reply), scene, latest or {})
    ]


def failure(reply: str, scene: ApiScene) -> tuple[ErrorKind, str]:
    with pytest.raises(CodeError) as raised:
        run_exact(fenced(reply), scene, {})
    return raised.value.kind, raised.value.message


SEAT_DAVID = (
    "    david = get_character('David')\n"
    "    david.set_target_action('eat')\n"
    "    david.set_position(get_area_to_sit_on(seat))\n"
)
DAVID_ON_CHAIR_2 = [("David", ["sit on chair_2"], "eat", None)]


def program(body: str, top: str = "") -> str:
    """`top` at module level, then a `parse_event` running `body` and seating David on `seat`."""
    inner = "".join(f"    {line}\n" for line in body.strip("\n").splitlines())
    return f"{top}def parse_event():\n{inner}{SEAT_DAVID}"


# --- the plan ---------------------------------------------------------------------------------------------------------


def test_the_plan_is_what_parsed_event_holds_in_its_order(house_scene: ApiScene) -> None:
    code = (
        "def parse_event():\n"
        "    ryan = get_character('Ryan')\n"
        "    ryan.set_orientation('tv_1')\n"
        "    area = get_intersected_area(get_area_close_to('table_1'), get_area_in_front_of('tv_1'))\n"
        "    ryan.set_position(area)\n"
        "    ryan.set_target_action('use_smartphone')\n"
        "    area.conditions.append('behind couch_1')\n"  # the entry holds the area's live list
        "    david = get_character('David')\n"
        "    david.set_position([1.0, 2.5])\n"
        "    ryan.set_orientation('couch_1')\n"
    )
    assert entries(code, house_scene) == [
        ("Ryan", ["close to table_1", "in front of tv_1", "behind couch_1"], "use_smartphone", ["look at couch_1"]),
        ("David", [1.0, 2.5], "", None),
    ]


def test_the_reference_shapes_of_areas_and_handles(house_scene: ApiScene) -> None:
    code = program(
        "assert get_area_to_sit_on('chair_2') == Area(['sit on chair_2'])\n"
        "assert repr(Area()) == 'Area(conditions=[])'\n"
        "assert get_character('David') == Character_('David', self)\n"
        "assert isinstance(get_object_supporting('tv_1'), Object)\n"
        "try:\n    get_character('Eve').set_position('chair_1')\nexcept ValueError as e:\n    assert str(e) == "
        "\"Invalid position type: <class 'str'>\"\n"
        "seat = 'chair_2'"
    )
    assert entries(code, house_scene) == [
        ("Eve", [], "", None),
        *DAVID_ON_CHAIR_2,
    ]  # the failed setter made Eve's entry


def test_parsed_event_written_directly_is_the_plan(house_scene: ApiScene) -> None:
    code = (
        "def parse_event():\n"
        "    self.parsed_event['Ryan'] = {'position': ('adjacent to table_3',), 'target_action': 'text',\n"
        "                                 'orientation': 'ab'}\n"
    )
    assert entries(code, house_scene) == [("Ryan", ("adjacent to table_3",), "text", ["a", "b"])]


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("self.parsed_event = [('Ryan', 'text')]", "AttributeError: 'list' object has no attribute 'values'"),
        ("self.parsed_event = {'Ryan': ['text']}", "TypeError: list indices must be integers or slices, not str"),
        ("del self.parsed_event", "AttributeError: 'CodeExecutor' object has no attribute 'parsed_event'"),
        # Every entry's action is read before any position.
        (
            "self.parsed_event = {'A': {'target_action': 'x'}, 'B': {'position': []}}",
            "KeyError: 'target_action'",
        ),
        ("self.parsed_event = {'A': {'target_action': 'x'}}", "KeyError: 'position'"),
        (
            "self.parsed_event = {'A': {'target_action': 'x', 'position': [], 'orientation': None}}",
            "TypeError: 'NoneType' object is not iterable",
        ),
    ],
)
def test_a_parsed_event_the_reference_cannot_convert_is_a_plan_error(
    house_scene: ApiScene, code: str, message: str
) -> None:
    assert failure(f"def parse_event():\n    {code}\n", house_scene) == (ErrorKind.CODE_PLAN, message)


# --- the rewrite and the entry point ----------------------------------------------------------------------------------


def test_the_executor_has_the_reference_method_for_every_rewritten_name() -> None:
    methods = {
        name for name, value in vars(CodeExecutor).items() if callable(value) and name.startswith(("_get_", "_is_"))
    }
    assert methods == {f"_{name}" for name in API_FUNCTIONS}
    assert prepare_code("x = self.get_character('A')  # get_area_to_sit_on", EXACT_PREFIX) == (
        "x = self.self._get_character('A')  # self._get_area_to_sit_on"
    )
    # Parameter names are the reference's: keyword calls succeed or fail as there.
    assert list(inspect.signature(CodeExecutor._get_objects_between).parameters) == [
        "self",
        "anchor_1",
        "anchor_2",
        "label",
    ]


def test_generate_next_plan_is_an_entry_header(house_scene: ApiScene) -> None:
    code = program("seat = 'chair_2'").replace("def parse_event():", "def generate_next_plan():")
    assert entries(code, house_scene) == DAVID_ON_CHAIR_2


@pytest.mark.parametrize(
    ("code", "kind", "message"),
    [
        (
            "def parse_event() -> None:\n    pass\n",
            ErrorKind.CODE_NO_ENTRY,
            "TypeError: parse_event() takes 0 positional arguments but 1 was given",
        ),
        ("def plan():\n    pass\n", ErrorKind.CODE_NO_ENTRY, "NameError: name 'parse_event' is not defined"),
        ("parse_event = 'soon'\n", ErrorKind.CODE_NO_ENTRY, "TypeError: first argument must be callable"),
        ("def parse_event(\n", ErrorKind.CODE_SYNTAX, "SyntaxError: '(' was never closed (<string>, line 1)"),
        # A helper whose name holds an API name no longer compiles.
        (
            "def get_closest_object_to(x):\n    return x\n",
            ErrorKind.CODE_SYNTAX,
            "SyntaxError: expected '(' (<string>, line 1)",
        ),
        (
            "def parse_event():\n    self.get_character('David')\n",
            ErrorKind.CODE_RUNTIME,
            "AttributeError: 'CodeExecutor' object has no attribute 'self'",
        ),
        (
            "def parse_event():\n    def helper():\n        raise TypeError('inside')\n    helper()\n",
            ErrorKind.CODE_RUNTIME,
            "TypeError: inside",
        ),
    ],
)
def test_entry_and_syntax_failures(house_scene: ApiScene, code: str, kind: ErrorKind, message: str) -> None:
    assert failure(code, house_scene) == (kind, message)


# --- namespaces -------------------------------------------------------------------------------------------------------


def test_top_level_helpers_and_imports_are_invisible_inside_parse_event(house_scene: ApiScene) -> None:
    helper = program("seat = pick()", top="def pick():\n    return 'chair_2'\n\n")
    assert failure(helper, house_scene) == (ErrorKind.CODE_RUNTIME, "NameError: name 'pick' is not defined")
    imported = program("seat = 'chair_%d' % math.floor(2.5)", top="import math\n\n")
    assert failure(imported, house_scene) == (ErrorKind.CODE_RUNTIME, "NameError: name 'math' is not defined")


def test_only_list_of_typing_is_bound(house_scene: ApiScene) -> None:
    bound = program("def pick(names: List[str]) -> str:\n    return names[0]\nseat = pick(['chair_2'])")
    assert entries(bound, house_scene) == DAVID_ON_CHAIR_2
    for name in ("Optional", "Dict"):
        nested = program(f"def pick(names: {name}[str]) -> str:\n    return names\nseat = pick('chair_2')")
        assert failure(nested, house_scene) == (ErrorKind.CODE_RUNTIME, f"NameError: name '{name}' is not defined")
    imported = program(
        "from typing import Optional, Dict\ndef pick(names: Dict[str, int]) -> Optional[str]:\n"
        "    return 'chair_2'\nseat = pick({})"
    )
    assert entries(imported, house_scene) == DAVID_ON_CHAIR_2


def test_the_globals_are_the_reference_modules_names_fresh_each_run(house_scene: ApiScene) -> None:
    names = sorted({"__name__", *GLOBAL_NAMES})
    code = program(
        f"assert sorted(globals()) == {names!r}, sorted(globals())\n"
        f"assert __name__ == {REFERENCE_MODULE!r}\n"
        "assert (np.pi, re.escape('.'), types.SimpleNamespace, logging.INFO, List) is not None\n"
        "global MARK\nassert 'MARK' not in globals()\nMARK = 1\n"
        "seat = 'chair_2'"
    )
    assert entries(code, house_scene) == DAVID_ON_CHAIR_2
    assert entries(code, house_scene) == DAVID_ON_CHAIR_2  # MARK did not survive the first run


def test_top_level_code_sees_the_reference_locals(house_scene: ApiScene) -> None:
    code = (
        "assert list(locals()) == ['response', 'match', 'global_context', 'self'], list(locals())\n"
        "assert response.startswith('assert list(locals())') and 'self._get_character' in response\n"
        "assert global_context is globals()\n"
        "CODE = match.group(1)\n"
        "def parse_event():\n"
        "    get_character('Ryan').set_target_action('text')\n"
    )
    reply = fenced(code)
    assert run_exact(reply, house_scene, {})[0].target_action == "text"
    probe = code.replace("CODE = match.group(1)", "self.parsed_event['m'] = {'target_action': match, 'position': []}")
    [match, _] = run_exact(fenced(probe), house_scene, {})
    found = match.target_action
    assert isinstance(found, re.Match)
    assert found.group(1) == extract_code(fenced(probe))
    assert found.group(0) == f"```python\n{found.group(1)}\n```"
    assert found.span() == (len("Here is the plan.\n"), len("Here is the plan.\n") + len(found.group(0)))
    unfenced = run_exact(
        code.replace("CODE = match.group(1)\n", "")
        + "self.parsed_event['m'] = {'target_action': match, 'position': []}\n",
        house_scene,
        {},
    )
    assert unfenced[0].target_action is None  # no python block: the reference's search found nothing


def test_the_api_answers_as_the_reference(house_scene: ApiScene) -> None:
    code = (
        "def parse_event():\n"
        "    ryan = get_character('Ryan')\n"
        "    ryan.set_target_action(get_closest_object('table_1', 'chair'))\n"
        "    ryan.set_position(get_objects_close_to('table_1'))\n"
        "    ryan.set_orientation(str(is_object_occupied('couch_1')))\n"
        "    get_objects_between('chair_1', 'chair_3', 'table')\n"
    )
    assert failure(code, house_scene) == (
        ErrorKind.CODE_RUNTIME,
        "AttributeError: 'CodeExecutor' object has no attribute 'between_threshold'",
    )
    seated = {"Lisa": LatestPlan("eat", ("sit on couch_1",), "completed")}
    code = code.replace("    get_objects_between('chair_1', 'chair_3', 'table')\n", "")
    assert entries(code, house_scene, seated) == [("Ryan", ["potted_plant_1", "table_2"], "chair_1", ["look at True"])]
    supporting = "def parse_event():\n    get_character('R').set_target_action(get_object_supporting('tv_1'))\n"
    [entry] = run_exact(supporting, house_scene, {})
    assert isinstance(entry.target_action, SceneObject) and entry.target_action == "table_1"


# --- what the restricted sandbox refuses ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "import random\nseat = random.choice(['chair_2'])",
        "import copy\nseat = copy.deepcopy(['chair_2'])[0]",
        "import logging\nlogging.getLogger('planner').debug('x')\nseat = 'chair_2'",
        "from types import SimpleNamespace\nseat = SimpleNamespace(name='chair_2').name",
        "from collections import namedtuple\nSeat = namedtuple('Seat', 'name')\nseat = Seat('chair_2').name",
        "def _pick(options):\n    return options[-1]\n_options = ['chair_1', 'chair_2']\nseat = _pick(_options)",
        "class Seat:\n    def __init__(self, name, d):\n        self.name, self.d = name, d\n"
        "    def __lt__(self, other):\n        return self.d < other.d\n"
        "    def __repr__(self):\n        return f'Seat({self.name})'\n"
        "seat = min([Seat('chair_1', 3.0), Seat('chair_2', 1.0)]).name",
        "@dataclass\nclass Seat:\n    name: str\n    tags: list = field(default_factory=list)\n"
        "seat = Seat('chair_2').name",
        "seat = types.SimpleNamespace(name='chair_2').name",
        "seat = [n for n in get_objects_close_to('table_4', 'chair') if n.endswith('2')][0]",
        "seat = sorted(get_objects_close_to('table_4', 'chairs'), key=lambda n: get_distance_between('table_4', n))[0]",
    ],
)
def test_what_the_restricted_sandbox_refuses_runs(house_scene: ApiScene, body: str) -> None:
    assert entries(program(body), house_scene) == DAVID_ON_CHAIR_2


# --- failures of the code ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "kind", "message"),
    [
        ("raise MemoryError('big')", ErrorKind.CODE_MEMORY, "MemoryError: big"),
        (
            "def f(n):\n    return f(n + 1)\nf(0)",
            ErrorKind.CODE_RUNTIME,
            "RecursionError: maximum recursion depth exceeded",
        ),
        ("raise SystemExit(3)", ErrorKind.CODE_RUNTIME, "SystemExit: 3"),
        ("raise KeyboardInterrupt", ErrorKind.CODE_RUNTIME, "KeyboardInterrupt"),
        ("get_closest_object('unicorn_1')", ErrorKind.CODE_RUNTIME, "KeyError: 'unicorn_1'"),
        (
            "get_character('A').set_position(5)",
            ErrorKind.CODE_RUNTIME,
            "ValueError: Invalid position type: <class 'int'>",
        ),
        ("raise TypeError('a wrong signature inside')", ErrorKind.CODE_RUNTIME, "TypeError: a wrong signature inside"),
    ],
)
def test_every_exception_is_the_models(house_scene: ApiScene, body: str, kind: ErrorKind, message: str) -> None:
    assert failure(program(body), house_scene) == (kind, message)


def test_run_exact_returns_plan_entries(house_scene: ApiScene) -> None:
    result = run_exact(fenced(program("seat = 'chair_2'")), house_scene, {})
    assert [type(e) for e in result] == [PlanEntry]
    assert Area.__module__ == Character_.__module__ == CodeExecutor.__module__ == REFERENCE_MODULE
