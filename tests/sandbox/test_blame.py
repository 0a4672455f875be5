"""Whose fault an exception is: the model's (an execution error with the reference's exception) or edsb's own
(`EdsbFault`: the run becomes incomplete, never the model's error).

The classification runs on real tracebacks: from real code API calls in this process, and from real workers running
real programs. A bug of edsb is simulated honestly, by giving edsb's own code inconsistent internal data (a scene
whose graph lost an object's edges), so the exception is raised by edsb's real code, not by the test.
"""

from __future__ import annotations

import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import load_scene
from edsb.sandbox import (
    ApiScene,
    CodeApi,
    CodeContext,
    CodeError,
    EdsbFault,
    SandboxPool,
)
from edsb.sandbox.provenance import fault_text
from edsb.sandbox.restricted.blame import is_models_fault, program_code
from edsb.sandbox.restricted.policy import MODEL_OPERATIONS


@pytest.fixture(scope="module")
def broken_house(benchmark: Benchmark) -> ApiScene:
    """The House with a graph that lost the edges of `table_1`: edsb's own lookups of them fail (a simulated bug)."""
    scene = ApiScene(load_scene(benchmark, "House"))
    scene.edges = {name: edges for name, edges in scene.edges.items() if name != "table_1"}
    return scene


def raised(call) -> BaseException:
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError("the call did not raise")


# --- the classification on real tracebacks ----------------------------------------------------------------------------


def test_the_apis_answers_to_the_models_mistakes_are_the_models(house_scene: ApiScene) -> None:
    api = CodeApi(house_scene)
    mistakes = [
        lambda: api.get_closest_object("chair_99"),  # an object that does not exist
        lambda: api.get_closest_object(["chair_1"]),  # an unhashable name
        lambda: api.get_objects_in_front_of("chair_99"),  # the reference's assert
        lambda: api.get_objects_close_to("table_1", label=5),  # a label that cannot be sliced
        lambda: api.get_intersected_area("close to table_1", api.get_area_to_sit_on("chair_1")),  # not an Area
        lambda: api.get_character("A").set_position("sit on chair_1"),  # neither an Area nor a list
        lambda: api.get_character(["A"]).set_target_action("eat"),  # an unhashable character
        lambda: api.get_object_supporting("toaster_1") == 5,  # a handle compared with a number
        lambda: api.get_area_close_to(10**5000),  # an int too long to format
    ]
    for mistake in mistakes:
        exc = raised(mistake)
        assert is_models_fault(exc, frozenset()), exc


def test_an_exception_of_edsbs_own_lookups_is_not_the_models(broken_house: ApiScene) -> None:
    exc = raised(lambda: CodeApi(broken_house).get_objects_close_to("table_1"))
    assert isinstance(exc, KeyError)
    assert not is_models_fault(exc, frozenset())
    assert fault_text(exc).startswith("KeyError: 'table_1' (raised at edsb/sandbox/code_api.py:")


def test_an_exception_raised_in_the_models_code_or_a_guard_is_the_models() -> None:
    code = compile("def parse_event():\n    return {}['x']\n", "<string>", "exec")
    namespace: dict = {}
    exec(code, namespace)
    exc = raised(namespace["parse_event"])
    assert is_models_fault(exc, program_code(code))
    from edsb.sandbox.restricted.policy import _getitem  # the guard that performs `a[b]` for the model

    assert is_models_fault(raised(lambda: _getitem({}, "x")), MODEL_OPERATIONS)


# --- through real workers ---------------------------------------------------------------------------------------------


def failure(pool: SandboxPool, scene: ApiScene, body: str) -> tuple[str, str]:
    with pytest.raises(CodeError) as caught:
        pool.execute(f"def parse_event():\n{body}\n", CodeContext.create(scene))
    return caught.value.kind, caught.value.message


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("    x = {}['chair_9']", "KeyError: 'chair_9'"),
        ("    x = [1][3]", "IndexError: list index out of range"),  # through the item guard
        ("    a, b = [1, 2, 3]", "ValueError: too many values to unpack (expected 2)"),
        ("    for a, b in [1]:\n        pass", "TypeError: 'int' object is not iterable"),  # the unpacking guard
        ("    x = 1 / 0", "ZeroDivisionError: division by zero"),
        ("    print(1, sep=2)", "TypeError: sep and end must be strings"),
        ("    assert False, 'no plan'", "AssertionError: no plan"),
        ("    re.compile('(')", "error: missing ), unterminated subpattern at position 0"),  # raised inside `re`
    ],
)
def test_exceptions_of_the_models_code_stay_execution_errors(
    pool: SandboxPool, house_scene: ApiScene, body, message
) -> None:
    assert failure(pool, house_scene, body) == ("code_runtime", message)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("    get_closest_object()", "TypeError: CodeApi.get_closest_object() missing 1 required positional argument"),
        ("    get_area_between('chair_1')", "TypeError: CodeApi.get_area_between() missing 1 required positional"),
        ("    get_closest_object(*['table_1', 'chair', 3])", "TypeError: CodeApi.get_closest_object() takes from"),
        ("    get_closest_object(anchr='table_1')", "TypeError: CodeApi.get_closest_object() got an unexpected"),
        ("    get_closest_object({'table_1': 1})", "TypeError: unhashable type: 'dict'"),
        ("    get_objects_close_to('table_1', label=7)", "TypeError: 'int' object is not subscriptable"),
        ("    get_intersected_area(1, 2)", "AttributeError: 'int' object has no attribute 'conditions'"),
        ("    get_character('A') == get_object_supporting('toaster_1')", "NotImplementedError: a scene object cannot"),
        ("    get_area_close_to(10 ** 5000)", "ValueError: Exceeds the limit (4300 digits) for integer string"),
    ],
)
def test_wrong_calls_of_the_api_are_execution_errors(pool: SandboxPool, house_scene: ApiScene, body, message) -> None:
    kind, text = failure(pool, house_scene, body)
    assert kind == "code_runtime" and text.startswith(message)


def test_a_fault_of_edsbs_code_while_the_model_code_runs_is_edsbs(pool: SandboxPool, broken_house: ApiScene) -> None:
    context = CodeContext.create(broken_house)
    located = r"^KeyError: 'table_1' \(raised at edsb/sandbox/code_api\.py:\d+ in _edges_of\)"
    with pytest.raises(EdsbFault, match=located):
        pool.execute("def parse_event():\n    get_objects_close_to('table_1')\n", context)
    # The model's own mistakes on the same scene are still the model's, and the replaced worker serves them.
    assert failure(pool, broken_house, "    get_closest_object('chair_99')") == ("code_runtime", "KeyError: 'chair_99'")
    # A fault the model's code catches is gone; what the code raises itself afterwards is its own.
    caught = "    try:\n        get_objects_close_to('table_1')\n    except KeyError:\n        x = 1 / 0"
    assert failure(pool, broken_house, caught) == ("code_runtime", "ZeroDivisionError: division by zero")
