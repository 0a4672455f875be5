"""The sandbox's allowances and the attacks on them, delivered as Event Parser answers through the real pipeline of
one `edsb run` process (scripted loopback model, real sandbox workers, real judge, real result store).

Plan code that uses what the reference's `exec` allows (numpy, typing annotations, an `if __name__ == "__main__":`
block, `str.format`, a small class) must pass; each attack on those allowances, each type or class leak and each
unrenderable exception must be the model's execution error of the expected kind (never `internal_error`), create no
file, and leave the next run unaffected.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.data import require_data
from tests.support.edsb_cli import Outcome, child_env, edsb_child
from tests.support.openai_server import OpenAIServer
from tests.support.run_dir import read_results
from tests.support.scripted_programs import BENIGN_BODY, ProgramScript, program, programs_by_run, run_args

PLAN = "David eats sitting on chair_2"  # what every parity program computes, each in its own way
EXPECTED_PLAN = {"David": {"target_action": ["eat", "sit"], "relationships": ["sit on chair_2"]}}


def reply(name: str, code: str) -> str:
    """An Event Parser reply holding a whole program (top-level statements included)."""
    return f"Here is the plan.\n```python\n# program: {name}\n{code.strip()}\n```\n"


SET_PLAN = "    david = get_character('David')\n    david.set_target_action('eat')\n"
PARITY = {
    "numpy_import_and_norm": reply(
        "numpy_import_and_norm",
        """
def parse_event():
    import numpy as np
    positions = {'chair_1': [1.0, 1.0], 'chair_2': [3.0, 4.0]}
    here = np.array([0.0, 0.0])
    distance = {name: float(np.linalg.norm(np.array(p) - here)) for name, p in positions.items()}
    names = list(distance)
    seat = names[int(np.argmax([distance[n] for n in names]))]
    if np.isclose(distance[seat], 5.0) and np.mean([1, 2, 3]) == 2.0:
"""
        + "".join(f"    {line}\n" for line in SET_PLAN.splitlines())
        + "        david.set_position(get_area_to_sit_on(seat))\n",
    ),
    "numpy_bare_np_and_from_import": reply(
        "numpy_bare_np_and_from_import",
        """
def parse_event():
    from numpy.linalg import norm
    gaps = np.array([norm([3, 4]), np.sqrt(2.0)])
    seat = ['chair_2', 'chair_1'][int(np.argmax(np.clip(gaps, 0, 10)))]
"""
        + SET_PLAN
        + "    david.set_position(get_area_to_sit_on(seat))\n",
    ),
    "typing_annotations": reply(
        "typing_annotations",
        """
from typing import List


def parse_event():
    from typing import Any, Dict, Optional

    def seats(names: List[str], first: Optional[int] = None) -> List[str]:
        return [n for n in names if n.startswith('chair')][:first]

    chosen: Dict[str, Any] = {'seat': seats(['table_1', 'chair_2', 'chair_1'], 1)[0]}
"""
        + SET_PLAN
        + "    david.set_position(get_area_to_sit_on(chosen['seat']))\n",
    ),
    "main_block_skipped": reply(
        "main_block_skipped",
        """
def parse_event():
"""
        + SET_PLAN
        + """    david.set_position(get_area_to_sit_on('chair_2'))


if __name__ == "__main__":
    parse_event()
""",
    ),
    "str_format": reply(
        "str_format",
        """
def parse_event():
    label, n = 'chair', 2
    seat = "{}_{}".format(label, n)
    assert "{name}_{n:d}".format_map({'name': label, 'n': n}) == seat
"""
        + SET_PLAN
        + "    david.set_position(get_area_to_sit_on(seat))\n",
    ),
    "small_class": reply(
        "small_class",
        """
def parse_event():
    class Candidate:
        def __init__(self, name, score):
            self.name = name
            self.score = score

        def beats(self, other):
            return self.score > other.score

    first, second = Candidate('chair_1', 1), Candidate('chair_2', 3)
    best = second if second.beats(first) else first
"""
        + SET_PLAN
        + "    david.set_position(get_area_to_sit_on(best.name))\n",
    ),
}


@dataclass(frozen=True)
class Attack:
    name: str
    body: str  # the body of parse_event; TARGET is replaced by a path under the watched directory
    kind: str  # the recorded error kind
    message: str  # the recorded error message ends with this (or, ending in " x", holds what precedes it)


POLICY, RUNTIME = "code_policy", "code_runtime"
OBJECT_ARRAY = "numpy arrays of Python objects (dtype=object) are not available in plan code"
ATTACKS = [
    Attack("np_save", "np.save('TARGET', np.zeros(3))", POLICY, "numpy.save is not available in plan code (it x"),
    Attack("np_savetxt", "import numpy\nnumpy.savetxt('TARGET', [1])", POLICY, "numpy.savetxt is not available in x"),
    Attack("np_memmap", "np.memmap('TARGET', mode='w+', shape=(8,))", POLICY, "numpy.memmap is not available in x"),
    Attack("np_lib_format", "np.lib.format.open_memmap('TARGET', mode='w+')", POLICY, "numpy.lib is not available x"),
    Attack("from_numpy_load", "from numpy import load\nload('TARGET')", POLICY, "numpy.load is not available in x"),
    Attack("ndarray_tofile", "np.arange(3).tofile('TARGET')", POLICY, "the attribute 'tofile' of numpy objects x"),
    Attack("ndarray_dump", "np.arange(3).dump('TARGET')", POLICY, "the attribute 'dump' of numpy objects x"),
    Attack("scalar_tofile", "np.float64(1).tofile('TARGET')", POLICY, "the attribute 'tofile' of numpy objects x"),
    Attack(
        "class_tofile",
        "type(np.zeros(1)).tofile(np.zeros(1), 'TARGET')",
        POLICY,
        "the attributes of the class numpy.ndarray are not available in plan code",
    ),
    Attack("ndarray_ctypes", "p = np.zeros(4).ctypes.data", POLICY, "the attribute 'ctypes' of numpy objects x"),
    Attack("array_interface", "d = getattr(np.zeros(4), '__array_inter' + 'face__')", POLICY, "'__array_inter x"),
    Attack("object_array", "a = np.array([get_character('David'), None])", POLICY, OBJECT_ARRAY),
    Attack("format_walk", "print('{0.__class__.__mro__}'.format(1))", POLICY, "the format field {0.__class__ x"),
    Attack(
        "format_map_walk",
        "print('{c.set_position.__self__}'.format_map({'c': get_character('David')}))",
        POLICY,
        "the format field {c.set_position.__self__} x",
    ),
    Attack("format_spec_walk", "print('{0:{1[0]}}'.format(1, [5]))", POLICY, "the format field {1[0]} reads x"),
    Attack("class_dunder", "class X:\n    def __format__(self, spec):\n        return ''", POLICY, "__format__ x"),
    Attack("class_base_str", "class S(str):\n    pass", POLICY, "the class S may only derive from classes x"),
    Attack(
        "forged_handle",
        "type(get_character('X'))('X', 42).set_target_action('eat')",
        POLICY,
        "the class Character cannot be called in plan code",
    ),
    Attack(
        "unbound_api_method",
        "getattr(type(self), 'get_clo' + 'sest_object')(1, 'chair_1')",
        POLICY,
        "the attributes of the class CodeApi are not available in plan code",
    ),
    Attack(
        "forged_scene_object",
        "type(get_object_supporting('microwave_1'))(1).label",
        POLICY,
        "the class SceneObject cannot be called in plan code",
    ),
    Attack("huge_int_message", "raise ValueError(10 ** 5000)", RUNTIME, "<its message could not be rendered: x"),
    Attack("huge_int_key", "d = {}\nd[10 ** 5000]", RUNTIME, "KeyError: <its message could not be rendered: x"),
    Attack(
        "huge_int_character",
        "raise RuntimeError(get_character(10 ** 5000))",
        RUNTIME,
        "RuntimeError: <its message could not be rendered: ValueError>",
    ),
    Attack("surrogate_message", "raise ValueError('\\ud800 no')", RUNTIME, "ValueError: \ufffd no"),
    Attack("huge_message", "raise ValueError('spam' * 10 ** 6)", RUNTIME, "spam…"),
    Attack(
        "numpy_label",
        "get_closest_object('table_1', np.array([]))",
        RUNTIME,
        "Use `array.size > 0` to check that an array is not empty.",
    ),
]


def attack_reply(attack: Attack, targets: Path) -> str:
    return program(attack.name, attack.body.replace("TARGET", str(targets / f"pwned-{attack.name}")))


@dataclass(frozen=True)
class Batch:
    process: Outcome
    targets: Path
    cwd: Path
    by_program: dict[str, dict]  # program name → its run's record


@pytest.fixture(scope="module")
def allowance_batch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Batch]:
    require_data()
    root = tmp_path_factory.mktemp("allowances")
    targets, cwd, out = root / "targets", root / "cwd", root / "run"
    targets.mkdir()
    cwd.mkdir()
    script = list(PARITY.values())
    for attack in ATTACKS:
        script += [attack_reply(attack, targets), program(f"benign-after-{attack.name}", BENIGN_BODY)]
    with OpenAIServer(ProgramScript(script)) as server:
        args = run_args(
            server.base_url, out, len(script), "--concurrency", "1", "--code-timeout", "5", sandbox="restricted"
        )
        process = edsb_child(args, env=child_env(root / "cache"), cwd=cwd)
    assert process.returncode == 0, process.stderr
    records = {record["key"]: record for record in read_results(out)}
    by_program = {name: records[key] for key, name in programs_by_run(out).items()}
    assert len(by_program) == len(script)
    yield Batch(process, targets, cwd, by_program)


@pytest.mark.parametrize("name", list(PARITY))
def test_code_the_reference_runs_passes(allowance_batch: Batch, name: str) -> None:
    record = allowance_batch.by_program[name]
    assert (record["status"], record["error"]) == ("passed", None)
    assert record["plan"] == EXPECTED_PLAN


def test_there_are_many_new_attacks(allowance_batch: Batch) -> None:
    assert len(ATTACKS) >= 25 and len({attack.name for attack in ATTACKS}) == len(ATTACKS)


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.name for attack in ATTACKS])
def test_attack_is_the_models_error_and_the_next_run_is_unaffected(allowance_batch: Batch, attack: Attack) -> None:
    record = allowance_batch.by_program[attack.name]
    assert (record["status"], record["error_kind"]) == ("error", attack.kind), record["error"]
    if attack.message.endswith(" x"):  # the rest of the message names a reason or a list that may grow
        assert attack.message[:-2] in record["error"], record["error"]
    else:
        assert record["error"].endswith(attack.message), record["error"]
    following = allowance_batch.by_program[f"benign-after-{attack.name}"]
    assert (following["status"], following["plan"]) == ("passed", EXPECTED_PLAN), following["error"]


def test_no_file_appears_and_the_process_ends_cleanly(allowance_batch: Batch) -> None:
    assert list(allowance_batch.targets.iterdir()) == []
    assert list(allowance_batch.cwd.iterdir()) == []
    assert "Traceback" not in allowance_batch.process.stderr
    assert "internal_error" not in allowance_batch.process.stderr
