"""Sandbox escape attempts delivered the way a hostile model would deliver them: as Event Parser answers, through the
real pipeline of one `edsb run` process (scripted loopback model, real sandbox workers, real judge).

Every attack is followed by a benign program that must pass, so each attack is also checked for leaving anything
behind for the next run. One invocation carries the whole script; the tests below then read its outputs.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.data import require_data
from tests.support.edsb_cli import Outcome, child_env, edsb_child
from tests.support.openai_server import OpenAIServer
from tests.support.run_dir import every_output, read_results
from tests.support.scripted_programs import BENIGN_BODY, ProgramScript, program, programs_by_run, run_args

CODE_TIMEOUT = 1.0
CODE_MEMORY_MB = 512

POLICY = {("error", "code_policy")}
TIMEOUT = {("error", "code_timeout")}
MEMORY = {("error", "code_memory")}
RUNTIME = {("error", "code_runtime")}
OUTPUT = {("error", "code_output")}
SYNTAX = {("error", "code_syntax")}
PASSED = {("passed", None)}  # harmless by design (nothing shared can change): the run is judged like any other

CANARY_ENV = "EDSB_CANARY_SECRET"
CANARY = f"canary-{uuid.uuid4().hex}"
API_KEY = f"sk-canary-{uuid.uuid4().hex}"


@dataclass(frozen=True)
class Attack:
    name: str
    body: str  # the body of parse_event; TARGET is replaced by a path under the watched directory
    expected: set[tuple[str, str | None]]  # acceptable (status, error_kind) of the run


PLAN = (
    "get_character('David').set_target_action('eat')\n"
    "get_character('David').set_position(get_area_to_sit_on('chair_2'))"
)
ENVIRON = "get_character('David').set_target_action(str(ENV))"

ATTACKS = [
    # Modules, files, processes, sockets.
    Attack("import_os", "import os\nos.system('touch TARGET')\n" + PLAN, POLICY),
    Attack("import_from", "from os import environ\n" + ENVIRON.replace("ENV", "environ"), POLICY),
    Attack("dunder_import", "__import__('os').system('touch TARGET')", POLICY),
    Attack("builtins_dict", "__builtins__['open']('TARGET', 'w').write('x')", POLICY),
    Attack("open_write", "open('TARGET', 'w').write('pwned')\n" + PLAN, POLICY),
    Attack("open_relative", "open('pwned-relative', 'w').write('pwned')\n" + PLAN, POLICY),
    Attack("open_parent_environ", "get_character('David').set_target_action(open('/proc/1/environ').read())", POLICY),
    Attack("swallowed_open", "try:\n    open('TARGET', 'w')\nexcept Exception:\n    pass\n" + PLAN, POLICY),
    Attack("fork_bomb", "import os\nwhile True:\n    os.fork()", POLICY),
    Attack("fork_dunder", "f = __import__('os').fork\nwhile True:\n    f()", POLICY),
    Attack("socket", "import socket\nsocket.create_connection(('127.0.0.1', 9)).send(b'x')", POLICY),
    Attack("subprocess", "import subprocess\nsubprocess.run(['touch', 'TARGET'])", POLICY),
    Attack("os_environ_by_name", ENVIRON.replace("ENV", "os.environ"), RUNTIME),
    # Dynamic code.
    Attack("exec", "exec(\"import os; os.system('touch TARGET')\")", POLICY),
    Attack("eval", "get_character('David').set_target_action(eval('1 + 1'))", POLICY),
    Attack("compile", "compile('import os', 'x', 'exec')", POLICY),
    # Namespaces and introspection.
    Attack("globals", "g = globals()\nprint(g)", POLICY),
    Attack("locals", "print(locals())", POLICY),
    Attack("vars", "print(vars())", POLICY),
    Attack("dir", "print(dir(get_closest_object))", POLICY),
    Attack("function_globals", "g = getattr(get_closest_object, '__globals__')", POLICY),
    Attack("bound_method_self", "api = get_closest_object.__self__", POLICY),
    Attack("subclasses", "print(().__class__.__base__.__subclasses__())", POLICY),
    Attack("dynamic_dunder", "cls = getattr(getattr((), '__cla' + 'ss__'), '__ba' + 'ses__')", POLICY),
    Attack("object_subclasses", "root = type(1).mro()[-1]\nprint(getattr(root, '__subclasses__')())", POLICY),
    Attack("hasattr_probe", "if hasattr(1, '__dict__'):\n    print('reachable')", POLICY),
    Attack("private_handle", "api = getattr(get_character('David'), '_api')", POLICY),
    # Format strings.
    Attack("format_walk", "print('{0.__class__.__mro__}'.format(1))", POLICY),
    Attack("format_map_walk", "print('{x.__class__}'.format_map({'x': 1}))", POLICY),
    Attack("unbound_format", "f = getattr(type(''), 'format')\nprint(f('{0.__class__}', 1))", POLICY),
    Attack("fstring_walk", "print(f'{get_character.__func__.__globals__}')", POLICY),
    # Classes and type().
    Attack("class_dunder", "class X:\n    def __getattribute__(self, name):\n        return 1", POLICY),
    Attack("type_three_args", "X = type('X', (), {})", POLICY),
    Attack(
        "metaclass_format",
        "S = type(type(''))('S', (str,), {})\nprint(getattr(S, 'format')('{0.__init__.__globals__}', Area))",
        POLICY,
    ),
    # Frames and tracebacks.
    Attack("traceback_frame", "try:\n    1 / 0\nexcept Exception as e:\n    f = e.__traceback__.tb_frame", POLICY),
    Attack("traceback_getattr", "try:\n    1 / 0\nexcept Exception as e:\n    t = getattr(e, '__traceback__')", POLICY),
    Attack("exception_method", "try:\n    1 / 0\nexcept Exception as e:\n    e.with_traceback(None)", POLICY),
    Attack("generator_frame", "g = (i for i in [1])\nprint(g.gi_frame.f_back.f_globals)", POLICY),
    Attack("generator_frame_getattr", "g = (i for i in [1])\nf = getattr(g, 'gi_frame')", POLICY),
    Attack("coroutine", "async def f():\n    pass\nf().cr_frame", POLICY),
    Attack("match_class_pattern", "match 1:\n    case int(__class__=c):\n        print(c)", POLICY),
    # Mutating the API or shared objects so that a later run is affected.
    Attack("rebind_api_function", "get_closest_object = lambda *args: 'chair_99'\n" + PLAN, POLICY),
    Attack("monkeypatch_handle", "c = get_character('David')\nc.set_position = None\n" + PLAN, POLICY),
    Attack("setattr_handle", "setattr(get_character('David'), 'name', 'Eve')", POLICY),
    Attack("patch_area_class", "Area.conditions = ['sit on chair_99']\n" + PLAN, POLICY),
    Attack("patch_builtin_type", "list.append = None\n" + PLAN, POLICY),
    Attack("leak_global", "global leaked\nleaked = True\n" + PLAN, PASSED),
    Attack(
        "mutate_returned_values",
        "close = get_objects_close_to('chair_2')\nclose.clear()\nclose.append('chair_99')\n"
        "a = get_area_to_sit_on('chair_2')\na.conditions[0] = 'sit on chair_99'\n"
        "get_character('David').set_target_action('eat')\n"
        "get_character('David').set_position(get_area_to_sit_on('chair_2'))",
        PASSED,
    ),
    Attack("shadow_builtins", "len = None\nsorted = None\nstr = None\n" + PLAN, PASSED),
    # Finalisers that would run during a later run.
    Attack(
        "finalizer_loop",
        "def g():\n    try:\n        yield 1\n    finally:\n        while True:\n            pass\n"
        "x = g()\nnext(x)\nkeep = [x]\nkeep.append(keep)\n" + PLAN,
        TIMEOUT,
    ),
    Attack(
        "finalizer_open",
        "def g():\n    try:\n        yield 1\n    finally:\n        open('TARGET', 'w')\n"
        "x = g()\nnext(x)\nkeep = [x]\nkeep.append(keep)\n" + PLAN,
        POLICY,
    ),
    # Resources.
    Attack("busy_loop", "while True:\n    pass", TIMEOUT),
    Attack("busy_loop_swallowing", "while True:\n    try:\n        pass\n    except Exception:\n        pass", TIMEOUT),
    Attack("endless_iterator", "for _ in iter(int, 1):\n    pass", TIMEOUT),
    Attack("huge_power", "x = 7 ** (10 ** 9)", TIMEOUT | MEMORY),
    Attack("string_bomb", "x = 'a' * 10 ** 10", MEMORY),
    Attack("list_bomb", "x = [0] * 10 ** 9", MEMORY),
    # Under a heavily loaded machine the wall-clock limit can come first; either way the attack is contained.
    Attack("growing_list", "x = []\nwhile True:\n    x.append(' ' * 10 ** 6)", TIMEOUT | MEMORY),
    Attack("deep_recursion", "def f(n):\n    return f(n + 1)\nf(0)", RUNTIME),
    Attack("deep_structure_error", "x = []\nfor i in range(200000):\n    x = [x]\nraise ValueError(x)", RUNTIME),
    Attack("gigantic_print", "print('x' * 10 ** 8)\n" + PLAN, PASSED),
    Attack("print_flood", "for i in range(10 ** 4):\n    print('spam' * 10)\n" + PLAN, PASSED),
    Attack("print_to_file", "print('x', file=[])", POLICY),
    Attack("gigantic_plan", "get_character('David').set_position(['x' * 1000] * 5000)", OUTPUT),
    Attack(
        "huge_relationship_list",
        "get_character('David').set_target_action('eat')\n"
        "get_character('David').set_position(['sit on chair_2'] * 40000)",
        OUTPUT,
    ),
    Attack("nesting_bomb", "x = " + "(" * 5000 + ")" * 5000, SYNTAX),
    Attack("input_blocks", "x = input()", POLICY),
    Attack("exit", "exit(0)", POLICY),
]


@dataclass(frozen=True)
class Batch:
    process: Outcome
    out: Path
    targets: Path
    cwd: Path
    records: dict[str, dict]  # run key → record
    programs: dict[str, str]  # run key → program name (from the transcripts)


def attack_program(attack: Attack, targets: Path) -> str:
    return program(attack.name, attack.body.replace("TARGET", str(targets / f"pwned-{attack.name}")))


@pytest.fixture(scope="module")
def attack_batch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Batch]:
    require_data()
    root = tmp_path_factory.mktemp("attacks")
    targets, cwd, out = root / "targets", root / "cwd", root / "run"
    targets.mkdir()
    cwd.mkdir()
    script = []
    for attack in ATTACKS:
        script += [attack_program(attack, targets), program(f"benign-after-{attack.name}", BENIGN_BODY)]
    env = child_env(root / "cache", **{CANARY_ENV: CANARY, "OPENAI_API_KEY": API_KEY})
    with OpenAIServer(ProgramScript(script)) as server:
        # These expectations are the restricted sandbox's; test_exact_attacks aims the same attacks at `exact`.
        args = run_args(server.base_url, out, len(script), "--concurrency", "1", sandbox="restricted")
        args += ["--code-timeout", str(CODE_TIMEOUT), "--code-memory", str(CODE_MEMORY_MB)]
        process = edsb_child(args, env=env, cwd=cwd)
    assert process.returncode == 0, process.stderr
    records = {record["key"]: record for record in read_results(out)}
    yield Batch(process, out, targets, cwd, records, programs_by_run(out))


def test_the_suite_is_large_and_every_attack_is_distinct(attack_batch: Batch) -> None:
    assert len(ATTACKS) >= 40
    assert len({attack.name for attack in ATTACKS}) == len(ATTACKS)
    assert len(attack_batch.records) == 2 * len(ATTACKS)


def test_every_run_is_recorded_once_and_in_script_order(attack_batch: Batch) -> None:
    lines = read_results(attack_batch.out)
    assert len(lines) == len({record["key"] for record in lines}) == 2 * len(ATTACKS)
    expected = [name for attack in ATTACKS for name in (attack.name, f"benign-after-{attack.name}")]
    by_repeat = {record["repeat"]: attack_batch.programs[key] for key, record in attack_batch.records.items()}
    assert [by_repeat[i] for i in range(len(expected))] == expected


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.name for attack in ATTACKS])
def test_attack_is_contained_and_the_next_run_is_unaffected(attack_batch: Batch, attack: Attack) -> None:
    by_program = {name: attack_batch.records[key] for key, name in attack_batch.programs.items()}
    record = by_program[attack.name]
    assert (record["status"], record["error_kind"]) in attack.expected, record["error"]
    if attack.expected == TIMEOUT:  # stopped by the wall-clock limit, not by the CPU backstop or anything else
        assert record["error"].endswith(f"TimeoutError: the code ran longer than {CODE_TIMEOUT:g} s"), record["error"]
    following = by_program[f"benign-after-{attack.name}"]
    assert following["status"] == "passed", following["error"]
    assert following["plan"] == {"David": {"target_action": ["eat", "sit"], "relationships": ["sit on chair_2"]}}


def test_results_stay_small_whatever_the_code_printed_or_set(attack_batch: Batch) -> None:
    lines = (attack_batch.out / "results.jsonl").read_bytes().splitlines()
    assert max(len(line) for line in lines) < 24 << 10  # a 16 KiB plan at most, a 2,000-character message
    assert b"x" * 1000 not in (attack_batch.out / "results.jsonl").read_bytes()


def test_no_file_appears(attack_batch: Batch) -> None:
    assert list(attack_batch.targets.iterdir()) == []
    assert list(attack_batch.cwd.iterdir()) == []
    assert not Path("/pwned-relative").exists()


def test_no_secret_reaches_any_output(attack_batch: Batch) -> None:
    everything = every_output(attack_batch.out, attack_batch.process.stdout, attack_batch.process.stderr)
    assert "results.jsonl" in os.listdir(attack_batch.out) and len(everything) > 10_000
    assert CANARY not in everything
    assert API_KEY not in everything


def test_the_process_ends_cleanly(attack_batch: Batch) -> None:
    assert "Traceback" not in attack_batch.process.stderr
    assert f"{2 * len(ATTACKS)} runs planned" in attack_batch.process.stderr
