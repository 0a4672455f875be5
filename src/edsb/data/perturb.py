"""The robustness suite's renaming: the same cases under character names and object ids no model has seen.

A perturbation seed > 0 maps every character name of the benchmark to a first name from `REPLACEMENT_NAMES` (one to
one, across all cases, feminine names to feminine ones and masculine to masculine, so "his laptop" still fits)
and, per scene, the instance numbers of each label to a permutation of themselves that moves every instance of a
label that has more than one (`chair_3` → `chair_5`, `chair_5` → `chair_1`, ...); and it renumbers every object's
record id by a permutation of the scene's ids (`id_mapping`), which also reorders the scene, whose order is the
reference's (label, then id). Geometry and every other byte stay as they are, so each puzzle is the same puzzle and
only a remembered answer, by name, by id or by position in the scene, stops working. Everything is derived from the
seed alone (string-seeded `random.Random`, identical in every process), so a seed gives the same benchmark on every
machine.

Text is rewritten in one pass of whole-word matches (`re` word boundaries: `Jason` never touches `Jasonville`,
`chair_1` never touches `chair_10` or `armchair_1`), so a permutation never chains (`chair_1` → `chair_3` and
`chair_3` → `chair_1` swap). The Benchmark applies it where it loads cases, objects and narratives; the object list
and the scene graph text list the objects in a shuffled order of their own (`listing_order`), and the scene's order,
which decides the spatial API's tie-breaks, follows the new ids within each label.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from edsb.data.models import SceneObjectRecord, TestCase
from edsb.errors import DataError, UsageError

# Distinct ASCII first names, in two pools so that a replacement keeps the usual gender of the name it replaces (a
# few instructions say "his laptop" or "her colleagues"). None is a name of the benchmark or of its prompt pack, none
# is a word of its prompts or descriptions, and none contains another or a benchmark name (checked against the data).
_FEMININE = """
    Adaeze Agnieszka Aino Aleksandra Amara Anastasia Anneliese Anouk Astrid Ayesha Beatrix Benedetta Bronwen Calliope
    Chiara Clementine Cosima Cressida Dagny Dorota Efua Eilidh Eleanora Elif Esperanza Fabiola Fenna Filippa Fiorella
    Giulia Gwendolyn Hortensia Ilse Imelda Imogen Ingrid Isidora Isolde Itzel Jacinta Jadwiga Jovana Kalani Kazimiera
    Kirra Ksenia Lavinia Leocadia Linnea Lucinda Ludovica Maelle Margarethe Marguerite Marisol Mireille Mirela Niamh
    Njeri Octavia Olamide Ophelia Ottoline Paloma Perpetua Philippa Ragnhild Renata Rhiannon Rosamund Sabine Sandrine
    Saoirse Seraphina Seren Signe Sigrid Svetlana Tamsin Teodora Ulla Ulrike Ursula Valentina Veronika Violetta
    Wendeline Wilhelmina Xaviera Xiomara Yolanda Zainab Zephyrine Zofia Zuzana
"""
_MASCULINE = """
    Abelard Ahanu Akira Alasdair Aleksei Ambrose Anselm Arjun Aurelio Babajide Bartholomew Bertrand Bjorn Branimir
    Caio Casimir Cedric Cyprian Dario Dashiell Deniz Desmond Dmitri Dragomir Eamon Ebenezer Emeka Enzo Evander
    Ezequiel Fitzgerald Florian Gaspard Gideon Godfrey Gunnar Halvard Hamza Hiroshi Horatio Idris Ignacio Ignatius
    Jaroslav Jarrah Joaquin Kaito Kenji Kofi Konstantin Lachlan Laszlo Leopold Lorcan Magnus Matteo Maximilian
    Mstislav Naoki Nikolai Oisin Oskar Pavel Peregrine Quentin Radomir Rafferty Reginald Rohan Ruairi Sebastiano
    Silvio Soren Sylvester Tadeo Tancredi Thaddeus Thiago Tobias Tomasz Torsten Ulrich Umberto Vasco Vidar Wenceslas
    Wojciech Wolfgang Yannick Yusuf Zbigniew Zoltan
"""
FEMININE_NAMES: tuple[str, ...] = tuple(_FEMININE.split())
MASCULINE_NAMES: tuple[str, ...] = tuple(_MASCULINE.split())
REPLACEMENT_NAMES: tuple[str, ...] = tuple(sorted(FEMININE_NAMES + MASCULINE_NAMES))
# The benchmark's characters usually read as women (every other name draws from the masculine pool).
_FEMININE_ORIGINAL_TEXT = """
    Allison Alyssa Amy Angela Ashley Brenda Brittney Caitlin Cassandra Cindy Courtney Crystal Dana Dawn Deanna Deborah
    Destiny Diane Donna Jennifer Jessica Julia Julie Karen Kathryn Kelly Kimberly Kristin Laurie Lindsey Lynn Madison
    Martha Mary Megan Melinda Melissa Michele Michelle Monica Norma Rebecca Robin Samantha Sara Sarah Sherry Stefanie
    Stephanie Summer Suzanne Tammy Taylor Teresa Theresa Tiffany Tracy Yvette Yvonne
"""
_FEMININE_ORIGINALS = frozenset(_FEMININE_ORIGINAL_TEXT.split())


def check_seed(seed: object) -> int:
    """The seed as an int; a clear error for anything but a non-negative integer."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise UsageError(f"perturb must be a non-negative integer (0 = the original benchmark), got {seed!r}")
    return seed


def perturbation_label(seed: int) -> str | None:
    """How reports name a perturbed run (`perturbed (seed 3)`); None for the original benchmark."""
    return f"perturbed (seed {seed})" if seed else None


def _rng(seed: int, *parts: str) -> random.Random:
    return random.Random("/".join(("edsb-perturb", str(seed), *parts)))


def case_character_names(case: TestCase) -> list[str]:
    """Every character a case names (its cast, history and expected plans), first-seen order."""
    names = [state.name for state in case.current_states]
    for entry in case.planning_history:
        names += entry.characters
        names += [detail.character for detail in entry.details]
    names += [plan.character for plan in case.expected_plans]
    return list(dict.fromkeys(names))


def character_mapping(seed: int, names: Iterable[str]) -> dict[str, str]:
    """Each name to a replacement from the pool of its usual gender, one to one; the same names and seed give the
    same mapping everywhere."""
    originals = sorted(set(names))
    if not seed:
        return {}
    clashes = sorted(set(originals) & set(REPLACEMENT_NAMES))
    if clashes:
        raise DataError(f"the benchmark uses replacement name(s) {', '.join(clashes)}: cannot perturb it")
    mapping: dict[str, str] = {}
    for kind, pool in (("feminine", FEMININE_NAMES), ("masculine", MASCULINE_NAMES)):
        group = [name for name in originals if (name in _FEMININE_ORIGINALS) == (kind == "feminine")]
        if len(group) > len(pool):
            raise DataError(f"{len(group)} {kind} character names, only {len(pool)} replacements")
        mapping.update(zip(group, _rng(seed, "characters", kind).sample(pool, len(group)), strict=True))
    return mapping


def _derangement(rng: random.Random, items: Sequence[int]) -> list[int]:
    """A uniformly drawn permutation of `items` that moves every item (rejection sampling: ~e draws)."""
    while True:
        shuffled = list(items)
        rng.shuffle(shuffled)
        if all(a != b for a, b in zip(items, shuffled, strict=True)):
            return shuffled


def object_mapping(seed: int, scene: str, records: Iterable[SceneObjectRecord]) -> dict[str, str]:
    """`label_N` → `label_M` for one scene: within each label a permutation of its instance numbers that moves every
    instance (a label with one instance keeps it). Empty for seed 0."""
    if not seed:
        return {}
    by_label: dict[str, list[int]] = defaultdict(list)
    for record in records:
        by_label[record.label].append(record.idx)
    rng = _rng(seed, scene, "objects")
    mapping: dict[str, str] = {}
    for label in sorted(by_label):
        numbers = sorted(by_label[label])
        moved = _derangement(rng, numbers) if len(numbers) > 1 else numbers
        mapping.update({f"{label}_{a}": f"{label}_{b}" for a, b in zip(numbers, moved, strict=True)})
    return mapping


def id_mapping(seed: int, scene: str, ids: Sequence[int]) -> dict[int, int]:
    """Each record id of one scene to its new id: a uniformly drawn permutation of the ids, never the identity (a
    scene of one object excepted), so neither an id nor a place in the scene's order is the published one. Uniform
    rather than a derangement: a label of two instances then keeps its order half the time, so its order tells
    nothing. Empty for seed 0."""
    if not seed:
        return {}
    order = sorted(ids)
    rng = _rng(seed, scene, "ids")
    while True:
        shuffled = list(order)
        rng.shuffle(shuffled)
        if len(order) < 2 or shuffled != order:
            return dict(zip(order, shuffled, strict=True))


def listing_order(seed: int, scene: str, ids: Sequence[int]) -> tuple[int, ...]:
    """The record ids in the order the object list and the scene graph text show them: shuffled, never the given
    order itself (a scene of one object excepted)."""
    order = list(ids)
    rng = _rng(seed, scene, "listing")
    while True:
        rng.shuffle(order)
        if len(order) < 2 or order != list(ids):
            return tuple(order)


class Renaming:
    """One scene's mapping (characters and object ids), applied to texts, cases and object records."""

    def __init__(self, mapping: Mapping[str, str]) -> None:
        self.mapping: dict[str, str] = dict(mapping)
        if len(set(self.mapping.values())) != len(self.mapping):
            raise ValueError("a renaming must be one to one")
        keys = sorted(self.mapping, key=len, reverse=True)
        self._pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, keys)) + r")\b") if keys else None

    def inverse(self) -> Renaming:
        return Renaming({new: old for old, new in self.mapping.items()})

    def text(self, text: str) -> str:
        """Every whole-word occurrence of a mapped name replaced, in one pass."""
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda match: self.mapping[match.group(0)], text)

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self._value(item) for item in value]
        if isinstance(value, dict):
            return {key: self._value(item) for key, item in value.items()}
        return value

    def case(self, case: TestCase) -> TestCase:
        """The case with every string rewritten (instruction, cast, history, expected plans and conditions); the
        labels, tags and states it holds contain no name, so they come out unchanged."""
        if self._pattern is None:
            return case
        return TestCase.model_validate(self._value(case.model_dump()))

    def records(
        self, records: Iterable[SceneObjectRecord], ids: Mapping[int, int] | None = None
    ) -> list[SceneObjectRecord]:
        """The scene's objects with their instance numbers renamed and their ids renumbered by `ids` (old → new),
        in the new id order; geometry untouched."""
        renamed = []
        for record in records:
            update: dict[str, int] = {}
            new = self.mapping.get(record.name, record.name)
            if new != record.name:
                update["idx"] = int(new.rsplit("_", 1)[1])
            if ids is not None and ids.get(record.id, record.id) != record.id:
                update["id"] = ids[record.id]
            renamed.append(record.model_copy(update=update) if update else record)
        return sorted(renamed, key=lambda record: record.id)
