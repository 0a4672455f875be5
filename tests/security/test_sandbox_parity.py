"""How much ordinary model code the sandbox runs that the reference runs: a corpus of plausible Event Parser programs,
each run twice, by an unsandboxed transcription of the reference's executor (`exec` in globals where `np`, `re`,
`types`, `List`, `dataclass`, `logging` and `Area` are bound) and by the real sandbox.

Every program sets the same plan after using one construct, so "runs" means "yields the plan". The reference runs
all of them; the sandbox runs those marked `RUNS` and refuses the others with the verdict given, which README
("Where edsb deliberately differs from the reference") counts. A construct moving between the two lists changes that
count, so this file is where such a change shows.
"""

from __future__ import annotations

import logging
import re
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import load_scene
from edsb.sandbox import ApiScene, Area, CodeApi, CodeContext, CodeError, SandboxLimits, SandboxPool
from edsb.sandbox.source import extract_code, prepare_code
from tests.support.data import DATA, require_data

RUNS = "ok"
PLAN = (
    "    david = get_character('David')\n    david.set_target_action('eat')\n"
    "    david.set_position(get_area_to_sit_on(SEAT))\n"
)


def program(body: str, top: str = "", after: str = "") -> str:
    """A reply: `top` at module level, `parse_event` running `body` and then setting the plan with `SEAT`, `after`."""
    inner = "".join(f"    {line}\n" for line in body.strip("\n").splitlines())
    return f"```python\n{top}def parse_event():\n{inner}{PLAN}{after}```"


CORPUS: dict[str, tuple[str, str]] = {
    # What both run.
    "plain API": (program("SEAT = get_closest_object('table_1', 'chair')\nSEAT = 'chair_2'"), RUNS),
    "math and itertools": (
        program(
            "import math, itertools\nd = math.dist([0, 0], [3, 4])\npairs = list(itertools.combinations('ab', 2))\n"
            "SEAT = 'chair_2'"
        ),
        RUNS,
    ),
    "re": (program("SEAT = re.sub(r'_(\\d+)$', r'_\\1', 'chair_2')"), RUNS),
    "numpy import": (
        program("import numpy as np\nd = np.linalg.norm(np.array([3.0, 4.0]))\nSEAT = 'chair_2' if d == 5 else 'x'"),
        RUNS,
    ),
    "bare np": (program("i = int(np.argmin(np.array([2.0, 0.5])))\nSEAT = ['chair_1', 'chair_2'][i]"), RUNS),
    "from numpy import": (program("from numpy import mean, clip\nSEAT = 'chair_%d' % clip(mean([2, 2]), 0, 9)"), RUNS),
    "numpy item assignment": (
        program(
            "score = np.zeros(2)\nscore[1] = 3.0\nscore[:1] += 1.0\nSEAT = ['chair_1', 'chair_2'][int(score.argmax())]"
        ),
        RUNS,
    ),
    "typing import": (
        program(
            "from typing import Optional\n"
            "def pick(names: List[str]) -> Optional[str]:\n    return names[0]\nSEAT = pick(['chair_2'])",
            top="from typing import List\n\n",
        ),
        RUNS,
    ),
    "future annotations": (
        program(
            "def pick(names: list[Seat]) -> Seat:\n    return names[0]\nSEAT = pick(['chair_2'])",
            top="from __future__ import annotations\n\n",
        ),
        RUNS,
    ),
    "main block": (program("SEAT = 'chair_2'", after="\nif __name__ == '__main__':\n    parse_event()\n"), RUNS),
    "str.format": (program("SEAT = '{}_{}'.format('chair', 2)"), RUNS),
    "format_map and format()": (program("SEAT = '{l}_{n}'.format_map({'l': 'chair', 'n': format(2, 'd')})"), RUNS),
    "small class": (
        program("class Seat:\n    def __init__(self, name):\n        self.name = name\nSEAT = Seat('chair_2').name"),
        RUNS,
    ),
    "class with staticmethod": (
        program(
            "class Pick:\n    @staticmethod\n    def best(xs):\n        return sorted(xs)[-1]\n"
            "SEAT = Pick.best(['chair_1', 'chair_2'])"
        ),
        RUNS,
    ),
    "own exception class": (
        program(
            "class NoSeat(Exception):\n    pass\ntry:\n    raise NoSeat('x')\nexcept NoSeat:\n    SEAT = 'chair_2'"
        ),
        RUNS,
    ),
    "try/except printing the error": (
        program(
            "try:\n    get_closest_object('nothing_1')\nexcept KeyError as e:\n    print('no object', e)\n"
            "SEAT = 'chair_2'"
        ),
        RUNS,
    ),
    "counter in an instance": (
        program("class C:\n    def __init__(self):\n        self.n = 0\nc = C()\nc.n += 2\nSEAT = f'chair_{c.n}'"),
        RUNS,
    ),
    "class name in an error message": (
        program("try:\n    {}['x']\nexcept Exception as e:\n    print(type(e).__name__)\nSEAT = 'chair_2'"),
        RUNS,
    ),
    "import collections": (
        program("from collections import Counter\nSEAT = Counter(['chair_2']).most_common(1)[0][0]"),
        RUNS,
    ),
    "defaultdict grouping": (
        program(
            "from collections import defaultdict\nby_label = defaultdict(list)\n"
            "by_label['chair'].append('chair_2')\nSEAT = by_label['chair'][0]"
        ),
        RUNS,
    ),
    # What the sandbox still refuses.
    "import random": (program("import random\nSEAT = random.choice(['chair_2'])"), "code_policy"),
    "namedtuple": (
        program("from collections import namedtuple\nSeat = namedtuple('Seat', 'name')\nSEAT = Seat('chair_2').name"),
        "code_policy",
    ),
    "import copy": (program("import copy\nSEAT = copy.deepcopy('chair_2')"), "code_policy"),
    "numpy random": (program("SEAT = str(np.random.choice(['chair_2']))"), "code_policy"),
    "dataclass (bound in the reference)": (
        program("@dataclass\nclass Seat:\n    name: str\nSEAT = Seat('chair_2').name"),
        "code_runtime",
    ),
    "types (bound in the reference)": (
        program("s = types.SimpleNamespace(name='chair_2')\nSEAT = s.name"),
        "code_runtime",
    ),
    "logging (bound in the reference)": (program("logging.info('planning')\nSEAT = 'chair_2'"), "code_runtime"),
    "dunder method": (
        program(
            "class S:\n    def __init__(self, n):\n        self.n = n\n    def __repr__(self):\n        return self.n\n"
            "SEAT = S('chair_2').n"
        ),
        "code_policy",
    ),
    "underscore helper": (program("def _pick():\n    return 'chair_2'\nSEAT = _pick()"), "code_policy"),
    "format index field": (program("SEAT = '{0[n]}'.format({'n': 'chair_2'})"), "code_policy"),
    "object() sentinel": (program("MISSING = object()\nSEAT = 'chair_2'"), "code_policy"),
}


REFERENCE_MODULE = "src.action_planning.event_parser.code_executor"


def reference_exec(reply: str, api: CodeApi, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference's `execute_response`, transcribed: find the block, rewrite, `exec` in the globals of the
    executor's module (registered, as an imported module is, so that `dataclass` finds it) with a locals dict holding
    `self`, bind `parse_event` to `self` and call it."""
    code = prepare_code(extract_code(reply))
    module = types.ModuleType(REFERENCE_MODULE)
    vars(module).update(
        np=np, re=re, types=types, List=list, dataclass=dataclass, field=field, logging=logging, Area=Area
    )
    monkeypatch.setitem(sys.modules, REFERENCE_MODULE, module)
    local_context: dict[str, Any] = {"self": api}
    # Compiled without this file's `from __future__ import annotations`, which a plain `exec` of a string inherits:
    # the reference's module has none, so its annotations are evaluated when a function is defined.
    exec(compile(code, "<string>", "exec", dont_inherit=True), vars(module), local_context)
    exec("bound = types.MethodType(parse_event, self)\nbound()", vars(module), local_context)


@pytest.fixture(scope="module")
def house() -> ApiScene:
    require_data()
    return ApiScene(load_scene(Benchmark.open(DATA), "House"))


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    with SandboxPool(SandboxLimits(timeout=5.0, memory_bytes=512 << 20, workers=2)) as pool:
        yield pool


@pytest.mark.parametrize("name", list(CORPUS))
def test_the_reference_runs_every_program(house: ApiScene, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    api = CodeApi(house)
    reference_exec(CORPUS[name][0], api, monkeypatch)
    [entry] = api._plan_entries()
    assert (entry.character, entry.target_action, entry.position) == ("David", "eat", ["sit on chair_2"])


@pytest.mark.parametrize("name", list(CORPUS))
def test_the_sandbox_runs_or_refuses_as_listed(pool: SandboxPool, name: str) -> None:
    reply, expected = CORPUS[name]
    try:
        raw = pool.execute(reply, CodeContext.for_benchmark(DATA, "House"))
    except CodeError as exc:
        assert str(exc.kind) == expected, exc.message
        return
    assert expected == RUNS
    [entry] = raw.characters
    assert (entry.character, entry.target_action, entry.position) == ("David", "eat", ["sit on chair_2"])


#: Code the reference cannot run because its executor binds `List` and no other typing name: a helper annotated with
#: one that the code did not import fails when it is defined.
UNBOUND_TYPING = program("def pick(names: List[str]) -> Optional[str]:\n    return names[0]\nSEAT = pick(['chair_2'])")


def test_a_typing_name_the_reference_does_not_bind_fails_in_both(
    house: ApiScene, pool: SandboxPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(NameError, match="name 'Optional' is not defined"):
        reference_exec(UNBOUND_TYPING, CodeApi(house), monkeypatch)
    with pytest.raises(CodeError) as caught:
        pool.execute(UNBOUND_TYPING, CodeContext.for_benchmark(DATA, "House"))
    assert (caught.value.kind, caught.value.message) == ("code_runtime", "NameError: name 'Optional' is not defined")


def test_the_sandbox_runs_most_of_the_corpus() -> None:
    runs = sum(verdict == RUNS for _, verdict in CORPUS.values())
    assert (runs, len(CORPUS)) == (20, 31)
