"""How much ordinary model code each sandbox runs as the reference runs it.

Two sets of programs. `CORPUS`: 31 plausible Event Parser programs that each use one construct and then set the
same plan. `REPLIES`: 40 whole replies in the styles GPT-4o, Claude, Llama and Qwen write for the Event Parser
prompt (prose around a fenced block, helpers, comprehensions, classes, numpy, prints, try/except), including the
mistakes those models make (an annotated `parse_event`, top-level helpers, a call to `parse_event()` at the end, a
missing fence, a helper whose name holds an API name).

The expected outcomes are the reference's, measured, not derived: every program was run through the reference
implementation's own executor (`CodeExecutor.execute_response` of rms0329/Event-Driven-Storytelling at commit
8a6f726, under Python 3.10 as the paper used) on the same scenes, built from the same scene files, with an empty
event history; what it raised (class and message), or the `parsed_event` it returned, is recorded here. None of the
reference's code is in this repository.

The exact sandbox (`run_exact`, called in-process: these programs are honest) must give every recorded outcome. Only
one thing may differ: CPython 3.11 words some syntax errors differently from 3.10 ("expected '('" for "invalid
syntax"), so a syntax error is compared by class and location.

The restricted sandbox runs the `CORPUS` programs marked `RUNS` and refuses the others with the verdict given, which
docs/known-issues.md ("Where edsb differs from the reference") counts. A construct moving between the two lists changes
that count, so this file is where such a change shows. "typing import" is an error in both: a name imported at top
level is invisible inside `parse_event`, the reference's executor binds `List` and no other typing name, and both
evaluate a function's annotations when it is defined.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias

import pytest

from edsb.sandbox import ApiScene, CodeContext, CodeError, SandboxLimits, SandboxPool
from edsb.sandbox.exact import run_exact
from tests.support.data import DATA

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
            "def pick(names: List[str]) -> Optional[str]:\n    return names[0]\nSEAT = pick(['chair_2'])",
            top="from typing import List, Optional\n\n",
        ),
        "code_runtime",  # NameError: name 'Optional' is not defined, as in the reference
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


#: The reference's outcome for the `CORPUS` programs that do not set David's plan: the exception it raised.
CORPUS_REFERENCE_ERRORS: dict[str, str] = {"typing import": "NameError: name 'Optional' is not defined"}

Outcome: TypeAlias = tuple[tuple[Any, ...], ...] | str


@dataclass(frozen=True)
class Reply:
    """A whole model reply, the scene it was planned in, and the reference's outcome: the entries of its
    `parsed_event` (character, position, target action, orientation or None), or the exception text it raised."""

    scene: str
    text: str
    reference: Outcome


REPLIES: dict[str, Reply] = {
    "gpt4o: closest sofa, comments, return list": Reply(
        "House",
        """```python
def parse_event():
    # The event involves 'Ryan' texting next to the table between the two armchairs.
    ryan = get_character("Ryan")

    # table_3 is close to both chair_1 and chair_3, which face each other.
    target_table = "table_3"
    ryan_position = get_area_adjacent_to(target_table)

    # The most appropriate action to describe texting is 'use_smartphone'.
    ryan.set_position(ryan_position)
    ryan.set_orientation(target_table)
    ryan.set_target_action("use_smartphone")

    return [ryan]
```""",
        (("Ryan", ["adjacent to table_3"], "use_smartphone", ["look at table_3"]),),
    ),
    "gpt4o: two characters chat on the couch and a chair": Reply(
        "House",
        """To parse this event, both characters should sit near the coffee table so they can chat.

```python
def parse_event():
    # Ryan and Lisa chat with each other in the living room.
    ryan = get_character("Ryan")
    lisa = get_character("Lisa")

    # Ryan sits on the couch, which is the main seat of the living room.
    ryan.set_position(get_area_to_sit_on("couch_1"))
    ryan.set_orientation("Lisa")
    ryan.set_target_action("chat")

    # Lisa takes the armchair closest to the couch.
    armchair = get_closest_object("couch_1", label="chair")
    lisa.set_position(get_area_to_sit_on(armchair))
    lisa.set_orientation("Ryan")
    lisa.set_target_action("chat")

    return [ryan, lisa]
```

This keeps both characters facing each other.""",
        (
            ("Ryan", ["sit on couch_1"], "chat", ["look at Lisa"]),
            ("Lisa", ["sit on chair_3"], "chat", ["look at Ryan"]),
        ),
    ),
    "gpt4o: intersected area in front of the tv": Reply(
        "House",
        """```python
def parse_event():
    david = get_character("David")
    # David dances in front of the TV, close to the record player.
    area = get_intersected_area(get_area_in_front_of("tv_1"), get_area_close_to("record_player_1"))
    david.set_position(area)
    david.set_orientation("tv_1")
    david.set_target_action("dance")
    return [david]
```""",
        (("David", ["in front of tv_1", "close to record_player_1"], "dance", ["look at tv_1"]),),
    ),
    "gpt4o: object supporting the record player": Reply(
        "House",
        """```python
def parse_event():
    # Find the table the record player stands on and stand close to it.
    norma = get_character("Norma")
    table = get_object_supporting("record_player_1")
    norma.set_position(get_area_close_to(table))
    norma.set_orientation("record_player_1")
    norma.set_target_action("turn_on_record_player")
    return [norma]
```""",
        (("Norma", ["close to table_2"], "turn_on_record_player", ["look at record_player_1"]),),
    ),
    "gpt4o: supporting object passed to a query": Reply(
        "House",
        """```python
def parse_event():
    norma = get_character("Norma")
    table = get_object_supporting("record_player_1")
    # Sit on the chair closest to that table.
    seat = get_closest_object(table, label="chair")
    norma.set_position(get_area_to_sit_on(seat))
    norma.set_target_action("drink")
    return [norma]
```""",
        "KeyError: table_2",
    ),
    "gpt4o: objects between two armchairs": Reply(
        "House",
        """```python
def parse_event():
    ryan = get_character("Ryan")
    # The table between the two armchairs facing each other.
    tables = get_objects_between("chair_1", "chair_3", label="table")
    ryan.set_position(get_area_adjacent_to(tables[0]))
    ryan.set_target_action("use_smartphone")
    return [ryan]
```""",
        "AttributeError: 'CodeExecutor' object has no attribute 'between_threshold'",
    ),
    "claude: helpers inside parse_event with docstrings": Reply(
        "House",
        '''I'll parse this event step by step.

```python
def parse_event():
    """Parse: [Jason] eats at the dining table."""

    def free_seats(table: str) -> List[str]:
        """Chairs around the table that nobody occupies."""
        chairs = get_objects_close_to(table, label="chair")
        return [c for c in chairs if not is_object_occupied(c)]

    def nearest(anchor: str, candidates: List[str]) -> str:
        return min(candidates, key=lambda c: get_distance_between(anchor, c))

    jason = get_character("Jason")
    seats = free_seats("table_4")
    seat = nearest("table_4", seats)

    jason.set_position(get_area_to_sit_on(seat))
    jason.set_orientation("table_4")
    jason.set_target_action("eat")
    return [jason]
```

**Reasoning:** Jason needs a free chair at the dining table (`table_4`), so I pick the nearest unoccupied one.''',
        (("Jason", ["sit on chair_2"], "eat", ["look at table_4"]),),
    ),
    "claude: Optional in a nested helper": Reply(
        "House",
        """```python
def parse_event():
    def find_free_chair(table: str) -> Optional[str]:
        # Return the first unoccupied chair near the table, if any.
        for chair in get_objects_close_to(table, label="chair"):
            if not is_object_occupied(chair):
                return chair
        return None

    jason = get_character("Jason")
    seat = find_free_chair("table_4") or "chair_2"
    jason.set_position(get_area_to_sit_on(seat))
    jason.set_target_action("eat")
    return [jason]
```""",
        "NameError: name 'Optional' is not defined",
    ),
    "claude: typing imported inside parse_event": Reply(
        "House",
        """```python
def parse_event():
    from typing import Dict, Optional

    def distances(anchor: str, names: List[str]) -> Dict[str, float]:
        return {n: get_distance_between(anchor, n) for n in names}

    def best(d: Dict[str, float]) -> Optional[str]:
        return min(d, key=d.get) if d else None

    jason = get_character("Jason")
    seat = best(distances("table_4", get_objects_close_to("table_4", "chairs")))
    jason.set_position(get_area_to_sit_on(seat))
    jason.set_orientation("table_4")
    jason.set_target_action("eat")
    return [jason]
```""",
        (("Jason", ["sit on chair_2"], "eat", ["look at table_4"]),),
    ),
    "claude: annotated parse_event": Reply(
        "House",
        '''```python
def parse_event() -> None:
    """Ryan texts next to the table between the armchairs."""
    ryan = get_character("Ryan")
    ryan.set_position(get_area_adjacent_to("table_3"))
    ryan.set_target_action("use_smartphone")
```''',
        "TypeError: parse_event() takes 0 positional arguments but 1 was given",
    ),
    "claude: try/except fallback on an unknown object": Reply(
        "House",
        """```python
def parse_event():
    lisa = get_character("Lisa")
    try:
        # The scene description mentions an armchair; fall back to the couch if that name is wrong.
        seat = get_closest_object("armchair_1", label="chair")
    except KeyError as error:
        print(f"Object not found: {error}")
        seat = "couch_1"
    lisa.set_position(get_area_to_sit_on(seat))
    lisa.set_target_action("read_book")
    return [lisa]
```""",
        (("Lisa", ["sit on couch_1"], "read_book", None),),
    ),
    "claude: dataclass for candidates": Reply(
        "House",
        """Here's a structured approach:

```python
def parse_event():
    @dataclass
    class Candidate:
        name: str
        distance: float

    norma = get_character("Norma")
    chairs = get_objects_close_to("table_4", label="chair")
    candidates = sorted(
        (Candidate(c, get_distance_between("table_4", c)) for c in chairs),
        key=lambda cand: cand.distance,
    )
    norma.set_position(get_area_to_sit_on(candidates[0].name))
    norma.set_orientation("table_4")
    norma.set_target_action("eat")
    return [norma]
```""",
        (("Norma", ["sit on chair_2"], "eat", ["look at table_4"]),),
    ),
    "claude: class with __lt__ and __repr__": Reply(
        "House",
        """```python
def parse_event():
    class Seat:
        def __init__(self, name, score):
            self.name = name
            self.score = score

        def __lt__(self, other):
            return self.score < other.score

        def __repr__(self):
            return f"Seat({self.name!r}, {self.score:.2f})"

    seats = [Seat(c, get_distance_between("couch_1", c)) for c in ["chair_1", "chair_3"]]
    best = min(seats)
    print("ranked:", sorted(seats))
    lisa = get_character("Lisa")
    lisa.set_position(get_area_to_sit_on(best.name))
    lisa.set_orientation("couch_1")
    lisa.set_target_action("chat")
    return [lisa]
```""",
        (("Lisa", ["sit on chair_3"], "chat", ["look at couch_1"]),),
    ),
    "claude: underscore helper and locals": Reply(
        "House",
        """```python
def parse_event():
    def _score(chair):
        return get_distance_between("tv_1", chair)

    _chairs = get_objects_close_to("table_3", label="chair")
    _best = min(_chairs, key=_score)
    david = get_character("David")
    david.set_position(get_area_to_sit_on(_best))
    david.set_orientation("tv_1")
    david.set_target_action("watch_tv")
    return [david]
```""",
        (("David", ["sit on chair_1"], "watch_tv", ["look at tv_1"]),),
    ),
    "llama: top-level helper": Reply(
        "House",
        """```python
def find_seat(table):
    chairs = get_objects_close_to(table, label="chair")
    return chairs[0]

def parse_event():
    jason = get_character("Jason")
    seat = find_seat("table_4")
    jason.set_position(get_area_to_sit_on(seat))
    jason.set_target_action("eat")
    return [jason]
```""",
        "NameError: name 'find_seat' is not defined",
    ),
    "llama: calls parse_event at the end": Reply(
        "House",
        """```python
def parse_event():
    ryan = get_character("Ryan")
    ryan.set_position(get_area_adjacent_to("table_3"))
    ryan.set_orientation("table_3")
    ryan.set_target_action("use_smartphone")
    return [ryan]

parse_event()
```""",
        "TypeError: parse_event() missing 1 required positional argument: 'self'",
    ),
    "llama: main guard": Reply(
        "House",
        """```python
def parse_event():
    ryan = get_character("Ryan")
    ryan.set_position(get_area_adjacent_to("table_3"))
    ryan.set_target_action("use_smartphone")
    return [ryan]

if __name__ == "__main__":
    print(parse_event())
```""",
        (("Ryan", ["adjacent to table_3"], "use_smartphone", None),),
    ),
    "llama: top-level import used inside": Reply(
        "House",
        """```python
import math

def parse_event():
    david = get_character("David")
    d = math.floor(get_distance_between("couch_1", "tv_1"))
    david.set_position(get_area_to_sit_on("couch_1"))
    david.set_target_action("watch_tv")
    return [david]
```""",
        "NameError: name 'math' is not defined",
    ),
    "llama: prose without a python fence": Reply(
        "House",
        """Here is the code to parse the event:

```
def parse_event():
    ryan = get_character("Ryan")
    ryan.set_position(get_area_adjacent_to("table_3"))
    ryan.set_target_action("use_smartphone")
```""",
        "SyntaxError: invalid syntax (<string>, line 1)",
    ),
    "llama: capitalised fence": Reply(
        "House",
        """```Python
def parse_event():
    ryan = get_character("Ryan")
    ryan.set_position(get_area_adjacent_to("table_3"))
    ryan.set_target_action("use_smartphone")
```""",
        "SyntaxError: invalid syntax (<string>, line 1)",
    ),
    "llama: returns a dict and sets nothing": Reply(
        "House",
        """```python
def parse_event():
    return {
        "Ryan": {
            "position": get_area_adjacent_to("table_3"),
            "target_action": "use_smartphone",
        }
    }
```""",
        (),
    ),
    "llama: helper named like an API function": Reply(
        "House",
        """```python
def parse_event():
    def get_objects_close_to_table(table):
        return get_objects_close_to(table, label="chair")

    jason = get_character("Jason")
    jason.set_position(get_area_to_sit_on(get_objects_close_to_table("table_4")[0]))
    jason.set_target_action("eat")
```""",
        "SyntaxError: invalid syntax (<string>, line 2)",
    ),
    "llama: self.get_character": Reply(
        "House",
        """```python
def parse_event():
    ryan = self.get_character("Ryan")
    ryan.set_position(self.get_area_adjacent_to("table_3"))
    ryan.set_target_action("use_smartphone")
```""",
        "AttributeError: 'CodeExecutor' object has no attribute 'self'",
    ),
    "llama: raw coordinates": Reply(
        "House",
        """```python
def parse_event():
    ryan = get_character("Ryan")
    ryan.set_position([2.5, 1.0])
    ryan.set_target_action("use_smartphone")
```""",
        (("Ryan", [2.5, 1.0], "use_smartphone", None),),
    ),
    "qwen: numpy argmin over distances": Reply(
        "House",
        """```python
import numpy as np

def parse_event():
    # Choose the chair nearest the dining table.
    chairs = get_objects_close_to("table_4", label="chair")
    dists = np.array([get_distance_between("table_4", c) for c in chairs])
    seat = chairs[int(np.argmin(dists))]

    jason = get_character("Jason")
    jason.set_position(get_area_to_sit_on(seat))
    jason.set_orientation("table_4")
    jason.set_target_action("eat")
    return [jason]
```""",
        (("Jason", ["sit on chair_2"], "eat", ["look at table_4"]),),
    ),
    "qwen: mapping of characters to seats": Reply(
        "House",
        """```python
def parse_event():
    # Assign each diner a chair around table_4.
    diners = ["Jason", "Norma"]
    chairs = sorted(get_objects_close_to("table_4", label="chair"))
    assignment = dict(zip(diners, chairs))
    for name, chair in assignment.items():
        c = get_character(name)
        c.set_position(get_area_to_sit_on(chair))
        c.set_orientation("table_4")
        c.set_target_action("eat")
        print(f"{name} -> {chair}")
    return [get_character(n) for n in diners]
```""",
        (
            ("Jason", ["sit on chair_2"], "eat", ["look at table_4"]),
            ("Norma", ["sit on chair_4"], "eat", ["look at table_4"]),
        ),
    ),
    "qwen: import random inside": Reply(
        "House",
        """```python
def parse_event():
    import random
    random.seed(0)
    lisa = get_character("Lisa")
    seat = random.choice(get_objects_close_to("table_4", label="chair"))
    lisa.set_position(get_area_to_sit_on(seat))
    lisa.set_target_action("eat")
    return [lisa]
```""",
        (("Lisa", ["sit on chair_5"], "eat", None),),
    ),
    "qwen: namedtuple and copy": Reply(
        "House",
        """```python
def parse_event():
    from collections import namedtuple
    import copy

    Plan = namedtuple("Plan", ["character", "area", "action", "look_at"])
    base = Plan("Lisa", get_area_to_sit_on("couch_1"), "watch_tv", "tv_1")
    plan = copy.deepcopy(base)._replace(character="Lisa")
    c = get_character(plan.character)
    c.set_position(plan.area)
    c.set_orientation(plan.look_at)
    c.set_target_action(plan.action)
    return [c]
```""",
        (("Lisa", ["sit on couch_1"], "watch_tv", ["look at tv_1"]),),
    ),
    "qwen: SimpleNamespace and logging": Reply(
        "House",
        """```python
def parse_event():
    from types import SimpleNamespace
    import logging
    logger = logging.getLogger("event_parser")
    info = SimpleNamespace(name="David", seat="couch_1", action="watch_tv")
    logger.info("planning %s", info.name)
    david = get_character(info.name)
    david.set_position(get_area_to_sit_on(info.seat))
    david.set_orientation("tv_1")
    david.set_target_action(info.action)
    return [david]
```""",
        (("David", ["sit on couch_1"], "watch_tv", ["look at tv_1"]),),
    ),
    "qwen: office meeting around a table": Reply(
        "Office",
        """```python
def parse_event():
    # Three colleagues meet at table_1; give each a chair around it.
    people = ["Emma", "Liam", "Olivia"]
    chairs = get_objects_associated_with("table_1", label="chair")
    for person, chair in zip(people, chairs):
        c = get_character(person)
        c.set_position(get_area_to_sit_on(chair))
        c.set_orientation("table_1")
        c.set_target_action("chat")
    return [get_character(p) for p in people]
```""",
        (("Emma", ["sit on chair_1"], "chat", ["look at table_1"]),),
    ),
    "qwen: laptop on the office table": Reply(
        "Office",
        """```python
def parse_event():
    emma = get_character("Emma")
    laptops = get_objects_supported_by("table_2", label="laptop")
    print("laptops on table_2:", laptops)
    if laptops:
        emma.set_position(get_area_to_interact_with(laptops[0]))
        emma.set_orientation(laptops[0])
    else:
        emma.set_position(get_area_close_to("table_2"))
    emma.set_target_action("use_laptop")
    return [emma]
```""",
        (("Emma", ["adjacent to laptop_3"], "use_laptop", ["look at laptop_3"]),),
    ),
    "gpt4o: restaurant stool at the bar": Reply(
        "Restaurant",
        """```python
def parse_event():
    # The customer orders a drink at the bar counter.
    mia = get_character("Mia")
    mia.set_position(get_area_adjacent_to("bar_counter_1"))
    mia.set_orientation("bar_counter_1")
    mia.set_target_action("drink")
    return [mia]
```""",
        (("Mia", ["adjacent to bar_counter_1"], "drink", ["look at bar_counter_1"]),),
    ),
    "claude: restaurant free chair with is_object_of_label": Reply(
        "Restaurant",
        """Let me find a free chair at a table with plates.

```python
def parse_event():
    def is_chair(name: str) -> bool:
        return is_object_of_label(name, "chair")

    tables_with_plates = [t for t in ["table_1", "table_2", "table_3"] if get_objects_supported_by(t, label="plates")]
    table = tables_with_plates[0] if tables_with_plates else "table_1"
    seats = [o for o in get_objects_close_to(table) if is_chair(o) and not is_object_occupied(o)]

    noah = get_character("Noah")
    noah.set_position(get_area_to_sit_on(seats[0]))
    noah.set_orientation(table)
    noah.set_target_action("eat")
    return [noah]
```""",
        (("Noah", ["sit on chair_10"], "eat", ["look at table_1"]),),
    ),
    "gpt4o: area between two objects and aligned": Reply(
        "House",
        """```python
def parse_event():
    david = get_character("David")
    lisa = get_character("Lisa")
    # They dance together between the couch and the TV.
    david.set_position(get_area_between("couch_1", "tv_1"))
    lisa.set_position(get_area_aligned_with("couch_1", "tv_1"))
    david.set_orientation("Lisa")
    lisa.set_orientation("David")
    david.set_target_action("dance")
    lisa.set_target_action("dance")
    return [david, lisa]
```""",
        (
            ("David", ["between couch_1 and tv_1"], "dance", ["look at Lisa"]),
            ("Lisa", ["aligned with couch_1 and tv_1"], "dance", ["look at David"]),
        ),
    ),
    "claude: walrus and any": Reply(
        "House",
        """```python
def parse_event():
    ryan = get_character("Ryan")
    if (near := get_objects_close_to("table_3", label="chair")) and any(c.endswith("_1") for c in near):
        ryan.set_position(get_area_to_sit_on(near[0]))
    else:
        ryan.set_position(get_area_adjacent_to("table_3"))
    ryan.set_target_action("read_book")
```""",
        (("Ryan", ["sit on chair_1"], "read_book", None),),
    ),
    "llama: top-level constants": Reply(
        "House",
        """```python
TABLE = "table_3"
ACTION = "use_smartphone"

def parse_event():
    ryan = get_character("Ryan")
    ryan.set_position(get_area_adjacent_to(TABLE))
    ryan.set_target_action(ACTION)
```""",
        "NameError: name 'TABLE' is not defined",
    ),
    "qwen: left and right of the couch": Reply(
        "House",
        """```python
def parse_event():
    left = get_objects_left_of("couch_1")
    right = get_objects_right_of("couch_1")
    behind = get_objects_behind("couch_1")
    front = get_objects_in_front_of("couch_1")
    print(left, right, behind, front)
    david = get_character("David")
    david.set_position(get_area_to_sit_on("couch_1"))
    david.set_orientation(front[0] if front else "tv_1")
    david.set_target_action("watch_tv")
    return [david]
```""",
        (("David", ["sit on couch_1"], "watch_tv", ["look at table_3"]),),
    ),
    "gpt4o: two blocks, the first is python": Reply(
        "House",
        """```python
def parse_event():
    david = get_character("David")
    david.set_position(get_area_to_interact_with("coffee_maker_1"))
    david.set_orientation("coffee_maker_1")
    david.set_target_action("use_coffee_maker")
    return [david]
```

Expected output:
```python
[david]
```""",
        (("David", ["adjacent to coffee_maker_1"], "use_coffee_maker", ["look at coffee_maker_1"]),),
    ),
    "claude: set_position with a string": Reply(
        "House",
        """```python
def parse_event():
    lisa = get_character("Lisa")
    lisa.set_target_action("read_book")
    lisa.set_position("sit on couch_1")
```""",
        "ValueError: Invalid position type: <class 'str'>",
    ),
    "qwen: match statement over the action": Reply(
        "House",
        """```python
def parse_event():
    action = "watch_tv"
    match action:
        case "watch_tv":
            seat, look = "couch_1", "tv_1"
        case _:
            seat, look = "chair_1", "table_3"
    david = get_character("David")
    david.set_position(get_area_to_sit_on(seat))
    david.set_orientation(look)
    david.set_target_action(action)
```""",
        (("David", ["sit on couch_1"], "watch_tv", ["look at tv_1"]),),
    ),
}


@pytest.fixture(scope="module")
def parity_pool() -> Iterator[SandboxPool]:
    with SandboxPool(SandboxLimits(timeout=5.0, memory_bytes=512 << 20, workers=2)) as pool:
        yield pool


@pytest.mark.parametrize("name", list(CORPUS))
def test_exact_gives_the_reference_outcome_on_the_corpus(api_scenes: dict[str, ApiScene], name: str) -> None:
    expected = CORPUS_REFERENCE_ERRORS.get(name, (("David", ["sit on chair_2"], "eat", None),))
    assert_reference_outcome(CORPUS[name][0], api_scenes["House"], expected)


@pytest.mark.parametrize("name", list(REPLIES))
def test_exact_gives_the_reference_outcome_on_realistic_replies(api_scenes: dict[str, ApiScene], name: str) -> None:
    reply = REPLIES[name]
    assert_reference_outcome(reply.text, api_scenes[reply.scene], reply.reference)


def assert_reference_outcome(reply: str, scene: ApiScene, expected: Outcome) -> None:
    try:
        entries = run_exact(reply, scene, {})
    except CodeError as exc:
        assert isinstance(expected, str), exc.message
        if expected.startswith("SyntaxError: "):  # CPython's wording changed between 3.10 and 3.11
            assert exc.message.startswith("SyntaxError: ")
            assert exc.message.rsplit(" (", 1)[1] == expected.rsplit(" (", 1)[1]
        else:
            assert exc.message == expected
        return
    got = tuple((e.character, _listed(e.position), e.target_action, e.orientation) for e in entries)
    assert got == expected


def _listed(position: Any) -> Any:
    """A position as the recorded outcomes write it (tuples as lists)."""
    return list(position) if isinstance(position, tuple) else position


@pytest.mark.parametrize("name", list(CORPUS))
def test_the_sandbox_runs_or_refuses_as_listed(parity_pool: SandboxPool, name: str) -> None:
    reply, expected = CORPUS[name]
    try:
        raw = parity_pool.execute(reply, CodeContext.for_benchmark(DATA, "House"))
    except CodeError as exc:
        assert str(exc.kind) == expected, exc.message
        return
    assert expected == RUNS
    [entry] = raw.characters
    assert (entry.character, entry.target_action, entry.position) == ("David", "eat", ["sit on chair_2"])


def test_the_sandbox_runs_most_of_the_corpus() -> None:
    runs = sum(verdict == RUNS for _, verdict in CORPUS.values())
    assert (runs, len(CORPUS)) == (19, 31)
    # All of those run in the reference too; of the 12 refused, 11 run there and "typing import" fails there as here.
    assert all(name not in CORPUS_REFERENCE_ERRORS for name, (_, verdict) in CORPUS.items() if verdict == RUNS)
    assert [name for name, (_, verdict) in CORPUS.items() if verdict != RUNS and name in CORPUS_REFERENCE_ERRORS] == [
        "typing import"
    ]
