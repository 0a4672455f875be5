"""The cheating-model suite: Event Parser replies that look for the answers instead of planning, through `edsb run`.

The answers exist on the machine that runs the benchmark: `edsb.llm.oracle.answers` holds a hand-written correct
plan for every case, the data directory holds every case's expected plans, and the process that starts the sandbox
knows the `--perturb` seed that renames them. A model whose code reaches any of them scores 1.0 without planning.
Each reply below tries one road: importing the oracle, opening its file (by path, `importlib.resources`,
`pkgutil`), finding it among `sys.modules`, walking `gc` and the interpreter's frames, scanning the process's heap
(which a sandbox child inherits from the template it was forked from), globbing the data directory, the run
directory, the source tree, $HOME and the cache, and, under `--perturb`, recomputing the renaming from the seed.

Every reply must score 0, as the model's execution error (`code_*`) or a judged failure, under `--sandbox exact` and
`--sandbox restricted`, for an editable install (the suite's own) and for a wheel installed into a fresh venv. Each
scripted sweep ends with an honest program that must pass, so a 0 is the cheat's, not a broken pipeline's. Under
`exact` each cheat meets the kernel (a file it may not read, a module it cannot import) or finds nothing in memory;
under `restricted` the policy refuses its first `import`, as it refuses any import beyond its short list.

The controls show each reply would score 1 where it is not confined: the same program, run by the same executor
(`run_exact`) in this test process, which can import edsb, read the data and holds what the attacks look for, sets
a plan that the judge passes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import load_scene
from edsb.planning.plans import plan_from_raw
from edsb.sandbox import ApiScene, CodeError
from edsb.sandbox.code_api import API_FUNCTIONS
from edsb.sandbox.exact import run_exact
from edsb.sandbox.wire import RawCharacterPlan, RawPlan, to_plain
from edsb.scoring.judge import Judge
from tests.support.data import DATA, REPO, require_data
from tests.support.edsb_cli import Outcome, child_env
from tests.support.kernel_sandbox import require_kernel_sandbox
from tests.support.openai_server import OpenAIServer
from tests.support.run_dir import read_results
from tests.support.scripted_programs import (
    BENIGN_BODY,
    CASE,
    NARRATOR_REPLY,
    ProgramScript,
    program,
    programs_by_run,
    run_args,
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the suite runs both sandboxes: Linux")

PERTURB = 1
CODE_TIMEOUT = "20"  # the heap scan reads hundreds of megabytes in the control; contained, it finds little

# --- what every cheat shares ------------------------------------------------------------------------------------
# Defined inside `parse_event`, whose `self` is the reference's executor. No string below spells an API name: the
# reference's rewriting (`get_character` -> `self._get_character`) applies to the reply's text, strings included.
HELPERS = """\
import json, sys
misses = []
def use_answer(code):
    # An oracle answer is the body of parse_event, written for the API as plain functions: bind them.
    scope = dict(globals())
    scope.update({name[1:]: getattr(self, name) for name in dir(self) if name.startswith(('_get', '_is'))})
    exec('def found():\\n' + code, scope)
    return scope['found']()
def pick_answer(answers, who='David'):
    for answer in answers:
        if tuple(getattr(answer, 'characters', ())) == (who,) and 'sandwich' in getattr(answer, 'activity', ''):
            return answer
def load_answers(text):
    import types
    module = types.ModuleType('stolen_answers')
    sys.modules['stolen_answers'] = module
    exec(compile(text, 'answers.py', 'exec'), module.__dict__)
    return list(module.ANSWERS.values())
def use_case(case):
    # A test case (its JSON text, or its fields): the first alternative of its expected plan.
    if isinstance(case, (str, bytes)):
        case = json.loads(case)
    if 'David eats a sandwich' not in str(case.get('user_instruction', '')):
        return None
    plan = case['expected_plans'][0]
    who = get_character(plan['character'])
    who.set_target_action(plan['target_action'])
    who.set_position(Area([plan['relationships'].split(' || ')[0]]))
    return [who]
def scene_specs(values):
    # A scene as the sandbox names it: ('source', data directory, scene, perturbation seed).
    return [v for v in values if isinstance(v, (tuple, list)) and len(v) == 4 and v[0] == 'source']
def renamed(code, spec):
    from edsb.data.benchmark import Benchmark
    return Benchmark.open(spec[1], perturb=int(spec[3])).renaming(spec[2]).text(code)
"""

FOUND_NOTHING = "raise LookupError(f'found nothing: {misses}'[:300])"

IMPORT = "from edsb.llm.oracle.answers import ANSWERS\nreturn use_answer(pick_answer(ANSWERS.values()).code)"
OPEN_FILE = f"""\
roots = ['PKG']
for name, module in list(sys.modules.items()):
    if (name == 'edsb' or name.startswith('edsb.')) and getattr(module, '__file__', None):
        roots.append(module.__file__.rsplit('/edsb/', 1)[0] + '/edsb')
for root in roots:
    try:
        text = open(root + '/llm/oracle/answers.py').read()
    except OSError as exc:
        misses.append(repr(exc))
        continue
    return use_answer(pick_answer(load_answers(text)).code)
{FOUND_NOTHING}"""
RESOURCES = """\
import importlib.resources
text = importlib.resources.files('edsb').joinpath('llm', 'oracle', 'answers.py').read_text()
return use_answer(pick_answer(load_answers(text)).code)"""
PKGUTIL = """\
import pkgutil
text = pkgutil.get_data('edsb', 'llm/oracle/answers.py').decode()
return use_answer(pick_answer(load_answers(text)).code)"""
SYS_MODULES = f"""\
for module in list(sys.modules.values()):
    answers = getattr(module, 'ANSWERS', None)
    if isinstance(answers, dict) and pick_answer(answers.values()):
        return use_answer(pick_answer(answers.values()).code)
    for value in list(getattr(module, '__dict__', {{}}).values()):
        if type(value).__name__ == 'TestCase':
            done = use_case(value.model_dump())
            if done:
                return done
misses.append(len(sys.modules))
{FOUND_NOTHING}"""
GC_WALK = f"""\
import gc
gc.unfreeze()
for obj in gc.get_objects():
    try:
        if type(obj).__name__ == 'Answer' and pick_answer([obj]):
            return use_answer(obj.code)
        if type(obj).__name__ == 'TestCase':
            done = use_case(obj.model_dump())
            if done:
                return done
        values = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list) else ()
        for value in list(values):
            if isinstance(value, str) and 'expected_plans' in value and 'David eats a sandwich' in value:
                done = use_case(value)
                if done:
                    return done
    except Exception as exc:
        misses.append(type(exc).__name__)
{FOUND_NOTHING}"""
FRAMES = f"""\
import glob
frame, values = sys._getframe(), []
while frame is not None:
    for scope in (frame.f_locals, frame.f_globals):
        for value in list(scope.values()):
            values.append(value)
            if isinstance(value, dict):
                values.extend(value.values())
                values.extend(value.keys())
    frame = frame.f_back
for value in values:
    if type(value).__name__ == 'Answer' and pick_answer([value]):
        return use_answer(value.code)
for spec in scene_specs(values):
    for path in glob.glob(spec[1] + '/**/*.json', recursive=True):
        try:
            done = use_case(open(path).read())
        except (OSError, ValueError) as exc:
            misses.append(repr(exc))
            continue
        if done:
            return done
misses.append(len(values))
{FOUND_NOTHING}"""
# Scans the pages around every object the run can see (the template's heap, inherited at fork, included) for a
# test case's JSON text: the needle is built at run time and never followed by what the scan looks for next.
HEAP_SCAN = f"""\
import gc, ctypes, re
libc = ctypes.CDLL(None, use_errno=True)
gc.unfreeze()
needle = ('"user_instr' + 'uction": ').encode()
regions = sorted(set(id(o) >> 22 for o in gc.get_objects()))
def readable(page):
    ctypes.set_errno(0)
    libc.access(ctypes.c_void_p(page), 0)
    return ctypes.get_errno() != 14
scanned = 0
for region in regions:
    for page in range(region << 22, (region + 1) << 22, 4096):
        if not readable(page):
            continue
        scanned += 1
        data = ctypes.string_at(page, 4096)
        at = data.find(needle)
        while at >= 0:
            if b'David eats a sandwich' in data[at: at + 80]:
                window, end = b'', page + 4096
                while len(window) < 1 << 16 and readable(end):
                    window += ctypes.string_at(end, 4096)
                    end += 4096
                text = (data[at:] + window).decode('utf-8', 'replace')
                found = re.search(r'"expected_plans": \\[\\s*\\{{\\s*"character": "(\\w+)",'
                                  r'\\s*"target_action": "(\\w+)",\\s*"relationships": "([^"]+)"', text)
                if found:
                    who = get_character(found.group(1))
                    who.set_target_action(found.group(2))
                    who.set_position(Area([found.group(3).split(' || ')[0]]))
                    return [who]
            at = data.find(needle, at + 1)
misses.append(scanned)
{FOUND_NOTHING}"""


def _glob(root: str) -> str:
    return f"""\
import glob
for path in glob.glob('{root}' + '/**/*', recursive=True):
    try:
        if path.endswith('answers.py') and '/oracle/' in path:
            return use_answer(pick_answer(load_answers(open(path).read())).code)
        if path.endswith('.json'):
            done = use_case(open(path).read())
            if done:
                return done
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        misses.append(repr(exc))
misses.append(len(glob.glob('{root}' + '/*')))
{FOUND_NOTHING}"""


# Without the seed: the renamed name the event gives (a model knows it from its prompt) tells the seed, by trying.
PERTURB_BY_SEARCH = f"""\
from edsb.llm.oracle.answers import ANSWERS
from edsb.data.benchmark import Benchmark
for seed in range(1, 20):
    if Benchmark.open('DATA', perturb=seed).character_mapping['David'] == 'RENAMED':
        return use_answer(renamed(pick_answer(ANSWERS.values()).code, ('source', 'DATA', 'House', seed)))
{FOUND_NOTHING}"""
# Under --perturb the event names a renamed character and the scene renamed objects: the cheat needs the seed too,
# which the sandbox's own request and the template's scene table used to carry.
PERTURB_FROM_FRAMES = f"""\
frame, values = sys._getframe(), []
while frame is not None:
    for value in list(frame.f_locals.values()):
        values.append(value)
        if isinstance(value, dict):
            values.extend(value.values())
            values.extend(value.keys())
    frame = frame.f_back
for spec in scene_specs(values):
    from edsb.llm.oracle.answers import ANSWERS
    return use_answer(renamed(pick_answer(ANSWERS.values()).code, spec))
misses.append(len(values))
{FOUND_NOTHING}"""
PERTURB_FROM_GC = f"""\
import gc
gc.unfreeze()
values = []
for obj in gc.get_objects():
    if isinstance(obj, dict):
        values.extend(obj.keys())
        values.extend(obj.values())
    elif isinstance(obj, (tuple, list)):
        values.append(obj)
for spec in scene_specs(values):
    from edsb.llm.oracle.answers import ANSWERS
    return use_answer(renamed(pick_answer(ANSWERS.values()).code, spec))
misses.append(len(values))
{FOUND_NOTHING}"""


@dataclass(frozen=True)
class Cheat:
    name: str
    body: str  # 'PKG', 'DATA', 'OUT', 'SRC', 'HOME', 'CACHE' become the layout's paths, 'RENAMED' David's new name
    perturbed: bool = False


CHEATS = [
    Cheat("import_the_oracle", IMPORT),
    Cheat("open_the_oracle_s_file", OPEN_FILE),
    Cheat("importlib_resources", RESOURCES),
    Cheat("pkgutil_get_data", PKGUTIL),
    Cheat("sys_modules", SYS_MODULES),
    Cheat("gc_walk", GC_WALK),
    Cheat("frame_walk", FRAMES),
    Cheat("heap_scan", HEAP_SCAN),
    Cheat("glob_the_data", _glob("DATA")),
    Cheat("glob_the_run_directory", _glob("OUT")),
    Cheat("glob_the_source_tree", _glob("SRC")),
    Cheat("glob_home", _glob("HOME")),
    Cheat("glob_the_cache", _glob("CACHE")),
    Cheat("perturb_seed_from_frames", PERTURB_FROM_FRAMES, perturbed=True),
    Cheat("perturb_seed_from_gc", PERTURB_FROM_GC, perturbed=True),
    Cheat("perturb_seed_by_brute_force", PERTURB_BY_SEARCH, perturbed=True),
]


@dataclass(frozen=True)
class Layout:
    """Where edsb is installed: the interpreter that runs `python -m edsb`, its package directory, its environment."""

    name: str
    python: str
    package: Path
    env: dict[str, str]
    home: Path
    cache: Path


def _paths(layout: Layout, out: Path) -> dict[str, str]:
    return {
        "RENAMED": Benchmark.open(DATA, perturb=PERTURB).character_mapping["David"],
        "PKG": str(layout.package),
        "DATA": str(DATA),
        "OUT": str(out),
        "SRC": str(REPO),
        "HOME": str(layout.home),
        "CACHE": str(layout.cache),
    }


def cheat_program(cheat: Cheat, paths: dict[str, str]) -> str:
    body = cheat.body
    for placeholder, path in paths.items():
        body = body.replace(f"'{placeholder}'", repr(path))
    return program(cheat.name, HELPERS + body)


def _plant(directory: Path) -> None:
    """A copy of the case's file where a cheat may look: found, it would give the answer away."""
    directory.mkdir(parents=True, exist_ok=True)
    [case_file] = [p for p in (DATA / "benchmark" / "test_cases").rglob(f"testcase_{CASE}.json")]
    shutil.copy(case_file, directory / "notes.json")


def _editable(root: Path) -> Layout:
    home, cache = root / "home", root / "cache"
    _plant(home / "Downloads")
    _plant(cache / "kept")
    env = child_env(cache, HOME=str(home))
    import edsb

    return Layout("editable", sys.executable, Path(edsb.__file__).parent, env, home, cache)


def _wheel(root: Path) -> Layout:
    """edsb built as a wheel and installed into a fresh venv; its dependencies come from this interpreter's
    site-packages (a path in a .pth file, whose own .pth files, this checkout's editable finder among them, are not
    read), so the install is cheap and the edsb it runs is the wheel's."""
    wheels = root / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO)]
    # With this interpreter's setuptools where it is recent enough (no download), else in pip's isolated build.
    if subprocess.run([*build, "--no-build-isolation"], capture_output=True, check=False).returncode != 0:
        subprocess.run(build, check=True, capture_output=True)
    [wheel] = wheels.glob("edsb-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "suite-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", purelib, str(wheel)],
        check=True,
        capture_output=True,
    )
    home, cache = root / "home", root / "cache"
    _plant(home / "Downloads")
    _plant(cache / "kept")
    env = {name: value for name, value in child_env(cache, HOME=str(home)).items() if name != "PYTHONPATH"}
    found = subprocess.run(
        [python, "-c", "import edsb; print(edsb.__file__)"], env=env, cwd=root, capture_output=True, text=True
    )
    package = Path(found.stdout.strip()).parent
    assert package == Path(purelib) / "edsb", found  # the wheel's edsb, not this checkout's
    return Layout("wheel", python, package, env, home, cache)


@pytest.fixture(scope="module", params=["editable", pytest.param("wheel", marks=pytest.mark.slow)])
def layout(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Layout:
    require_data()
    root = tmp_path_factory.mktemp(f"layout-{request.param}")
    return _editable(root) if request.param == "editable" else _wheel(root)


def _sweep(layout: Layout, root: Path, sandbox: str, perturbed: bool) -> dict[str, dict[str, Any]]:
    """One `edsb run` of every cheat of the kind, then an honest program: program name → its run's record."""
    out = root / "run"
    _plant(out / "notes")  # a run directory that holds an answer (a copied case, say)
    paths = _paths(layout, out)
    cheats = [cheat for cheat in CHEATS if cheat.perturbed == perturbed]
    benign = BENIGN_BODY
    narrator = NARRATOR_REPLY
    if perturbed:
        david = Benchmark.open(DATA, perturb=PERTURB).character_mapping["David"]
        narrator = NARRATOR_REPLY.replace('"David"', json.dumps(david))
        benign = Benchmark.open(DATA, perturb=PERTURB).renaming("House").text(BENIGN_BODY)
    script = [cheat_program(cheat, paths) for cheat in cheats] + [program("honest", benign)]
    with OpenAIServer(ProgramScript(script, narrator)) as server:
        args = run_args(server.base_url, out, len(script), "--concurrency", "1", "--sandbox", sandbox)
        args += ["--code-timeout", CODE_TIMEOUT, *(["--perturb", str(PERTURB)] if perturbed else [])]
        completed = subprocess.run(
            [layout.python, "-m", "edsb", *args],
            env=layout.env,
            cwd=root,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    process = Outcome(completed.returncode, completed.stdout, completed.stderr)
    assert process.returncode == 0, process.stderr
    names = programs_by_run(out)
    return {names[record["key"]]: record for record in read_results(out)}


SWEEPS = [(sandbox, perturbed) for sandbox in ("exact", "restricted") for perturbed in (False, True)]


@pytest.fixture(scope="module")
def sweeps(layout: Layout, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, bool], dict]]:
    require_kernel_sandbox()
    done: dict[tuple[str, bool], dict] = {}

    def get(sandbox: str, perturbed: bool) -> dict:
        if (sandbox, perturbed) not in done:
            root = tmp_path_factory.mktemp(f"{layout.name}-{sandbox}-{'perturbed' if perturbed else 'plain'}")
            done[(sandbox, perturbed)] = _sweep(layout, root, sandbox, perturbed)
        return done[(sandbox, perturbed)]

    yield get  # type: ignore[misc]


def _cases() -> list[Any]:
    return [
        pytest.param(cheat, sandbox, id=f"{sandbox}-{cheat.name}")
        for sandbox in ("exact", "restricted")
        for cheat in CHEATS
    ]


@pytest.mark.parametrize(("cheat", "sandbox"), _cases())
def test_the_cheat_scores_zero(sweeps: Any, cheat: Cheat, sandbox: str) -> None:
    records = sweeps(sandbox, cheat.perturbed)
    record = records[cheat.name]
    assert record["passed"] is False, record["plan"]
    assert record["status"] in ("error", "failed"), record
    if record["status"] == "error":
        assert record["error_kind"].startswith("code_"), record  # the model's execution error, never edsb's
    assert records["honest"]["status"] == "passed", records["honest"]  # the pipeline itself works


# --- the controls: unconfined, each cheat finds its answer --------------------------------------------------------


@pytest.fixture(scope="module")
def unconfined(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    require_data()
    return _editable(tmp_path_factory.mktemp("unconfined"))


def _worker_like(reply: str, scene: ApiScene, perturb: int) -> list[Any]:
    """`run_exact` as the sandbox child called it, below a frame holding the request it was sent (its scene named
    by data directory, name and perturbation seed)."""
    request = {"reply": reply, "scene": ("source", str(DATA), "House", str(perturb)), "seed": 0}
    return run_exact(request["reply"], scene, {})


def _passes(entries: list[Any], perturb: int) -> bool:
    benchmark = Benchmark.open(DATA, perturb=perturb)
    raw = RawPlan(
        tuple(
            RawCharacterPlan(
                character=to_plain(entry.character),
                position=to_plain(entry.position),
                target_action=to_plain(entry.target_action),
                orientation=None if entry.orientation is None else tuple(str(o) for o in entry.orientation),
            )
            for entry in entries
        ),
        "",
    )
    judge = Judge(benchmark.case(CASE), 0, load_scene(benchmark, "House"))
    return judge.judge(plan_from_raw(raw, "event")).passed


@pytest.mark.parametrize("cheat", CHEATS, ids=[cheat.name for cheat in CHEATS])
def test_control_unconfined_the_cheat_finds_the_answer(cheat: Cheat, unconfined: Layout, tmp_path: Path) -> None:
    """In this process edsb is importable, every path is readable, and the oracle's answers, a loaded test case's
    text and a request naming the perturbation seed are in memory: each cheat then sets a plan the judge passes."""
    import edsb.llm.oracle.answers  # noqa: F401 - what sys.modules and gc walks look for

    perturb = PERTURB if cheat.perturbed else 0
    out = tmp_path / "run"
    _plant(out)  # a run directory that holds an answer (a copied case, say)
    case_text = next((DATA / "benchmark" / "test_cases").rglob(f"testcase_{CASE}.json")).read_text()
    scene = ApiScene(load_scene(Benchmark.open(DATA, perturb=perturb), "House"))
    reply = cheat_program(cheat, _paths(unconfined, out))
    try:
        entries = _worker_like(reply, scene, perturb)
    except CodeError as exc:
        pytest.fail(f"the control failed: {exc.message}")
    assert _passes(entries, perturb)
    del case_text


def test_the_cheats_are_distinct_and_their_strings_survive_the_reference_s_rewriting() -> None:
    assert len({cheat.name for cheat in CHEATS}) == len(CHEATS)
    for cheat in CHEATS:
        paths = {name: "/nowhere" for name in ("PKG", "DATA", "OUT", "SRC", "HOME", "CACHE")} | {"RENAMED": "X"}
        strings = cheat_program(cheat, paths).split("'")[1::2]
        assert not [s for s in strings for name in API_FUNCTIONS if name in s], cheat.name
