"""`--sandbox exact`: the model's code run by CPython's own `exec`, as the reference's executor runs it
(docs/reference.md#code-execution): the same textual rewrite, a fresh copy of the executor module's global names, a
locals dict holding `self`, the define / bind with `types.MethodType` / call steps, and the reference's spatial API,
quirks and bugs included.

Nothing here emulates a quirk. An annotated `parse_event` fails on call, top-level helpers and imports are invisible
inside it, `Optional` is a NameError, a helper named `get_...` does not compile, because the code meets the same
rewrite, the same namespaces and the same `exec` calls as in the reference.

What `self` is: `CodeExecutor`, with the reference's API methods under its names and parameter names, answering from
`code_api.CodeApi` (which has the reference's semantics), except that areas and character handles are the reference's
own shapes (`Area`, `Character_`, dataclasses) so that model code can build, compare and print them as there. Its
public attributes are the ones plan code can use: `parsed_event`, `objects` and `finder` (object handles, as
`get_object_supporting` returns them), `last_plan`, `is_previous_event_set` and `logger`. The reference's pipeline
internals (`cfg`, `characters`, `scene_graph`, `previous_events`, `execute_response`, ...) are absent.

The reference's own modules and classes that its executor module binds are stand-ins: `Object` is edsb's object
handle (`isinstance(get_object_supporting(x), Object)` holds), `SceneGraph` is edsb's scene graph, and `sg`, `misc`,
`Character` and `Event` are empty stand-ins under the reference's names. Only code that reaches into the reference's
internals through them (`sg.get_distance_between_surfaces`, `Event(...)`) fails here where it would run there.

Where this cannot be the reference: its module globals are shared by every run in its process (a run that rebinds
one changes later runs), here each run gets a fresh copy; the `match` local has the reference's spans and groups but
not its pattern or `pos`; `__file__` is relative and `__cached__`, `__loader__` and `__spec__` are None; the debug
log lines the reference formats from the arguments are not formatted (only an argument whose formatting raises would
tell); CPython's own wording of some errors differs between 3.10 (the paper's) and later versions. A `parsed_event`
written by hand is converted as the reference converts it, except that when two of its entries are malformed in
different ways the one reported may be another (both are execution errors).

This module does not contain anything: it runs in a child that `edsb.sandbox.kernel.contain` has already locked
down. Every exception the code raises is the model's: the reference records any exception as an execution error.
"""

import builtins
import inspect
import logging
import re
import sys
import types
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, List  # noqa: UP035 - the reference's module binds typing's List, and only it

import numpy as np

from edsb.geometry.scene_graph import SceneGraph
from edsb.results import ErrorKind
from edsb.sandbox import code_api
from edsb.sandbox.code_api import ApiScene, CodeApi, LatestPlan, PlanEntry, SceneObject
from edsb.sandbox.errors import CodeError, exception_text
from edsb.sandbox.source import ENTRY_NAME, EXACT_PREFIX, code_block_span, extract_code, prepare_code

#: The dotted name of the reference's executor module: the `__name__` model code sees, the `__module__` of its classes.
REFERENCE_MODULE = "src.action_planning.event_parser.code_executor"


# --- the reference's shapes -------------------------------------------------------------------------------------------


@dataclass
class Area:
    """A region as a list of condition strings, the reference's dataclass."""

    conditions: List[str] = field(default_factory=list)  # noqa: UP006 - the reference's annotation


@dataclass
class Character_:
    """The handle `get_character` returns. Every setter first makes sure the character has an entry in the
    executor's `parsed_event` (an empty position and action), then writes its value, as the reference's do: code that
    catches a setter's error still leaves the entry behind."""

    name: str
    code_executor: "CodeExecutor"

    def set_target_action(self, action: Any) -> None:
        self._entry()["target_action"] = action

    def set_position(self, position: Any) -> None:
        entry = self._entry()
        if not isinstance(position, list | tuple | Area):
            raise ValueError("Invalid position type: " + format(type(position), ""))  # an f-string's formatting
        # A list or tuple (raw coordinates or strings, docs/reference.md#raw-positions) is kept as given; an area gives
        # its live list of conditions, so that later edits of the area still count.
        entry["position"] = position if isinstance(position, list | tuple) else position.conditions

    def set_orientation(self, target: Any) -> None:
        entry = self._entry()
        entry["orientation"] = [f"look at {target}"]  # replaces an earlier one

    def _entry(self) -> Any:
        plan = self.code_executor.parsed_event
        if self.name not in plan:
            plan[self.name] = dict(position=[], target_action="")
        return plan[self.name]


def _area(area: code_api.Area) -> Area:
    return Area(area.conditions)


class CodeExecutor:
    """`self` in the model's code: the reference's API methods under the reference's names (see the module notes)."""

    def __init__(self, scene: ApiScene, latest_plans: Mapping[str, LatestPlan]) -> None:
        self.__api = CodeApi(scene, latest_plans)
        self.objects = [SceneObject(box) for box in scene.objects]
        self.finder = {str(obj): obj for obj in self.objects}
        self.last_plan = {
            name: {"relationships": list(plan.relationships), "target_action": plan.target_action, "state": plan.state}
            for name, plan in latest_plans.items()
        }
        self.is_previous_event_set = True
        self.logger = logging.getLogger("CodeExecutor")
        self.parsed_event: Any = {}

    def _get_character(self, name: Any) -> Character_:
        return Character_(name, self)

    def _get_intersected_area(self, area_1: Any, area_2: Any) -> Area:
        return _area(self.__api.get_intersected_area(area_1, area_2))

    def _get_object_supporting(self, anchor: Any) -> SceneObject | None:
        return self.__api.get_object_supporting(anchor)

    def _get_objects_supported_by(self, anchor: Any, label: Any = None) -> list[str]:
        return self.__api.get_objects_supported_by(anchor, label)

    def _get_objects_in_front_of(self, anchor: Any, label: Any = None) -> list[str]:
        return self.__api.get_objects_in_front_of(anchor, label)

    def _get_objects_behind(self, anchor: Any, label: Any = None) -> list[str]:
        return self.__api.get_objects_behind(anchor, label)

    def _get_objects_left_of(self, anchor: Any, label: Any = None) -> list[str]:
        return self.__api.get_objects_left_of(anchor, label)

    def _get_objects_right_of(self, anchor: Any, label: Any = None) -> list[str]:
        return self.__api.get_objects_right_of(anchor, label)

    def _get_objects_between(self, anchor_1: Any, anchor_2: Any, label: Any = None) -> list[str]:
        return self.__api.get_objects_between(anchor_1, anchor_2, label)

    def _get_objects_close_to(self, anchor: Any, label: Any = None) -> list[str]:
        return self.__api.get_objects_close_to(anchor, label)

    def _get_objects_adjacent_to(self, anchor: Any, label: Any = None) -> list[str]:
        return self.__api.get_objects_adjacent_to(anchor, label)

    def _get_objects_associated_with(self, anchor: Any, label: Any = None) -> list[str]:
        return self.__api.get_objects_associated_with(anchor, label)

    def _get_closest_object(self, anchor: Any, label: Any = None) -> str:
        return self.__api.get_closest_object(anchor, label)

    def _get_area_in_front_of(self, anchor: Any) -> Area:
        return _area(self.__api.get_area_in_front_of(anchor))

    def _get_area_behind(self, anchor: Any) -> Area:
        return _area(self.__api.get_area_behind(anchor))

    def _get_area_left_of(self, anchor: Any) -> Area:
        return _area(self.__api.get_area_left_of(anchor))

    def _get_area_right_of(self, anchor: Any) -> Area:
        return _area(self.__api.get_area_right_of(anchor))

    def _get_area_close_to(self, anchor: Any) -> Area:
        return _area(self.__api.get_area_close_to(anchor))

    def _get_area_adjacent_to(self, anchor: Any) -> Area:
        return _area(self.__api.get_area_adjacent_to(anchor))

    def _get_area_to_sit_on(self, anchor: Any) -> Area:
        return _area(self.__api.get_area_to_sit_on(anchor))

    def _get_area_to_interact_with(self, anchor: Any) -> Area:
        return _area(self.__api.get_area_to_interact_with(anchor))

    def _get_area_between(self, anchor_1: Any, anchor_2: Any) -> Area:
        return _area(self.__api.get_area_between(anchor_1, anchor_2))

    def _get_area_aligned_with(self, anchor_1: Any, anchor_2: Any) -> Area:
        return _area(self.__api.get_area_aligned_with(anchor_1, anchor_2))

    def _get_distance_between(self, anchor_1: Any, anchor_2: Any) -> float:
        return self.__api.get_distance_between(anchor_1, anchor_2)

    def _is_object_occupied(self, obj: Any) -> bool:
        assert self.is_previous_event_set, "Previous events are not set"
        return self.__api.is_object_occupied(obj)

    def _is_object_of_label(self, obj: Any, label: Any) -> bool:
        return self.__api.is_object_of_label(obj, label)


class Character:
    """Stand-in for the reference's `src.type.Character` (model code has no use for it)."""


class Event:
    """Stand-in for the reference's `src.type.Event` (model code has no use for it)."""


for _class in (Area, Character_, CodeExecutor):
    _class.__module__ = REFERENCE_MODULE
Character.__module__ = Event.__module__ = "src.type"

#: The global names of the reference's executor module, in its order: what model code finds unimported. A run gets
#: a fresh module holding them.
GLOBAL_NAMES: dict[str, Any] = {
    "__doc__": None,
    "__package__": REFERENCE_MODULE.rpartition(".")[0],
    "__loader__": None,
    "__spec__": None,
    "__file__": REFERENCE_MODULE.replace(".", "/") + ".py",  # the reference's is absolute, on the user's machine
    "__cached__": None,
    "__builtins__": builtins.__dict__,
    "logging": logging,
    "re": re,
    "types": types,
    "dataclass": dataclass,
    "field": field,
    "List": List,  # noqa: UP006 - typing's, as the reference binds it
    "np": np,
    "sg": types.ModuleType("src.scene.relationships"),
    "misc": types.ModuleType("src.utils.misc"),
    "SceneGraph": SceneGraph,
    "Character": Character,
    "Event": Event,
    "Object": SceneObject,
    "Area": Area,
    "Character_": Character_,
    "CodeExecutor": CodeExecutor,
}


# --- running a reply --------------------------------------------------------------------------------------------------

# The reference's second and third steps, compiled without this module's compiler flags.
_BIND = compile(
    " ".join(("self.parse_event =", "types.MethodType(parse_event, self)")), "<string>", "exec", dont_inherit=True
)
_CALL = compile("self.parse_event()", "<string>", "exec", dont_inherit=True)


def run_exact(reply: str, scene: ApiScene, latest_plans: Mapping[str, LatestPlan]) -> list[PlanEntry]:
    """Run a reply's code the reference's way and return what it set, one entry per character in the order the
    reference's `parsed_event` holds them; CodeError (`edsb.sandbox.errors`) with the reference's exception text for
    every failure (all of them are the model's: the reference records any exception as an execution error)."""
    code = prepare_code(extract_code(reply), EXACT_PREFIX)
    try:
        # `exec` of a string compiles it with the caller's `__future__` flags; the reference's module has none.
        program = compile(code, "<string>", "exec", dont_inherit=True)
    except MemoryError:
        raise CodeError(ErrorKind.CODE_MEMORY, "MemoryError") from None
    except (SyntaxError, ValueError, RecursionError) as exc:  # RecursionError: nested too deeply to compile
        raise CodeError(ErrorKind.CODE_SYNTAX, exception_text(exc)) from None
    executor = CodeExecutor(scene, latest_plans)
    module = types.ModuleType(REFERENCE_MODULE)
    global_context = vars(module)
    global_context.update(GLOBAL_NAMES)
    # What the reference's `locals()` holds when it runs the code: its own frame's variables at that point, in the
    # order the reference's dict lists them.
    local_context = {
        "response": code,
        "match": reference_match(reply),
        "global_context": global_context,
        "self": executor,
    }
    step = program
    with _importable(module):
        try:
            exec(program, global_context, local_context)
            step = _BIND
            exec(_BIND, global_context, local_context)
            step = _CALL
            exec(_CALL, global_context, local_context)
        except BaseException as exc:
            raise _models_error(exc, step, _entry(local_context, global_context), executor) from None
    return _plan_entries(executor)


def reference_match(reply: str) -> re.Match[str] | None:
    """The match object the reference's code-block search returns, found in linear time: the same span and group,
    from a pattern that fixes the body's length (only its `re` and `pos` attributes tell it apart)."""
    span = code_block_span(reply)
    if span is None:
        return None
    start, body_start, body_end = span
    body = rf"([\s\S]{{{body_end - body_start}}})"
    return re.compile(_OPENING + body + _CLOSING).match(reply, start)


_OPENING = r"```python\s*\n"  # the reference's fence pattern, either side of the body
_CLOSING = r"\n\s*```"


@contextmanager
def _importable(module: types.ModuleType) -> Iterator[None]:
    """The module registered under the reference's name while the code runs, as an imported module is (dataclasses
    and `typing.get_type_hints` look a class's module up there)."""
    previous = sys.modules.get(REFERENCE_MODULE)
    sys.modules[REFERENCE_MODULE] = module
    try:
        yield
    finally:
        if previous is None:
            sys.modules.pop(REFERENCE_MODULE, None)
        else:
            sys.modules[REFERENCE_MODULE] = previous


def _entry(local_context: dict[str, Any], global_context: dict[str, Any]) -> Any:
    """What the bind step's name `parse_event` finds (locals, then globals), or None."""
    return local_context.get(ENTRY_NAME, global_context.get(ENTRY_NAME))


def _models_error(exc: BaseException, step: Any, entry: Any, executor: CodeExecutor) -> CodeError:
    """The CodeError for an exception of the model's code, with the kinds the restricted worker gives the same
    failures: no `parse_event` to bind, or one that cannot take `self`, is `code_no_entry`."""
    try:
        text = exception_text(exc)
    except MemoryError:
        text = "MemoryError"
    if isinstance(exc, MemoryError):
        return CodeError(ErrorKind.CODE_MEMORY, text)
    if step is _BIND and (isinstance(exc, TypeError) or (isinstance(exc, NameError) and exc.name == ENTRY_NAME)):
        return CodeError(ErrorKind.CODE_NO_ENTRY, text)
    if step is _CALL and isinstance(exc, TypeError) and not _takes_self(entry, executor):
        return CodeError(ErrorKind.CODE_NO_ENTRY, text)  # the call failed binding its arguments: no body ran
    return CodeError(ErrorKind.CODE_RUNTIME, text)


def _takes_self(entry: Any, executor: CodeExecutor) -> bool:
    try:
        inspect.signature(entry).bind(executor)
    except TypeError:
        return False
    except Exception:  # no signature to read (a builtin), or the model's `__signature__` failed: not a binding error
        return True
    return True


def _plan_entries(executor: CodeExecutor) -> list[PlanEntry]:
    """`parsed_event` as plan entries. The reference's conversion (docs/reference.md#plan-conversion) first reads every
    entry's `target_action`, then each entry's `position` and `orientation`; where it fails on a shape a plan entry
    cannot hold (the model wrote `parsed_event` itself: not a dict, an entry without a key), this raises its exception
    as `code_plan`. Failures on the values themselves are left to the parent's conversion (`planning.plans`), for the
    run's mode."""
    try:
        parsed = executor.parsed_event
        for items in parsed.values():
            items["target_action"]  # the reference's first read
        entries = []
        for name, items in parsed.items():
            entry = PlanEntry(name)
            entry.target_action = items["target_action"]
            entry.position = items["position"]
            if "orientation" in items:
                entry.orientation = list(items["orientation"])  # the reference iterates it
            entries.append(entry)
        return entries
    except MemoryError:
        raise CodeError(ErrorKind.CODE_MEMORY, "MemoryError") from None
    except BaseException as exc:
        raise CodeError(ErrorKind.CODE_PLAN, exception_text(exc)) from None
