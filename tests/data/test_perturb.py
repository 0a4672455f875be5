"""The robustness suite's renaming, artefact by artefact: the case JSON, the objects a scene loads, the scene graph,
the object list, the narratives and the expected conditions. Each must be renamed by whole words, one to one, and
everywhere: the inverse renaming gives back the original exactly, and no original name is left behind."""

from __future__ import annotations

import ast
import json
import re

import pytest
import yaml

from edsb.data.benchmark import Benchmark
from edsb.data.models import SCENES
from edsb.data.perturb import (
    FEMININE_NAMES,
    MASCULINE_NAMES,
    REPLACEMENT_NAMES,
    Renaming,
    case_character_names,
    character_mapping,
    check_seed,
    object_mapping,
    perturbation_label,
)
from edsb.errors import UsageError
from edsb.geometry.scene import load_scene
from edsb.geometry.scene_graph import scene_graph_of
from edsb.geometry.scene_text import object_list_text, scene_graph_text
from tests.support.data import DATA, unordered

SEEDS = (1, 2, 3)
PACK = DATA / "src" / "action_planning"


def _words(pattern: str, text: str) -> set[str]:
    return set(re.findall(pattern, text))


def original_names(benchmark: Benchmark) -> set[str]:
    return {name for case in benchmark.original_cases.values() for name in case_character_names(case)}


def whole_word(name: str, text: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", text) is not None


@pytest.fixture(scope="module", params=SEEDS)
def perturbed_benchmark(request: pytest.FixtureRequest) -> Benchmark:
    return Benchmark.open(DATA, perturb=request.param)


# --- the names and the mappings -------------------------------------------------------------------------------------
def test_replacement_names_are_new_to_the_benchmark_and_to_its_prompts(benchmark: Benchmark) -> None:
    assert len(set(REPLACEMENT_NAMES)) == len(REPLACEMENT_NAMES) >= len(original_names(benchmark))
    assert all(name.isascii() and name.isalpha() and name.istitle() for name in REPLACEMENT_NAMES)
    # Every word of the prompt pack (system prompts, few-shot examples and their names) and of the narratives.
    texts = [p.read_text("utf-8") for p in PACK.rglob("*") if p.suffix in (".txt", ".yaml")]
    texts += [p.read_text("utf-8") for p in (DATA / "configs" / "scenes").rglob("description-*.txt")]
    words = {word.lower() for text in texts for word in _words(r"[A-Za-z]+", text)}
    example_names = set()
    for path in PACK.rglob("examples/*.yaml"):
        example = yaml.safe_load(path.read_text("utf-8"))
        example_names |= {character["name"] for character in example.get("characters", [])}
    assert "David" in example_names  # the few-shot examples have names of their own, which the renaming leaves
    benchmark_names = original_names(benchmark) | example_names
    for name in REPLACEMENT_NAMES:
        assert name.lower() not in words, name
        assert not any(name.lower() in other.lower() for other in benchmark_names), name
        assert not any(other.lower() in name.lower() for other in benchmark_names), name
        assert not any(name in other for other in REPLACEMENT_NAMES if other != name), name


def test_seeds_are_non_negative_integers() -> None:
    assert check_seed(0) == 0 and check_seed(7) == 7
    for bad in (-1, True, "1", 1.0):
        with pytest.raises(UsageError, match="non-negative integer"):
            check_seed(bad)
    with pytest.raises(UsageError, match="non-negative integer"):
        Benchmark.open(DATA, perturb=-2)
    assert perturbation_label(0) is None and perturbation_label(3) == "perturbed (seed 3)"


def test_character_mapping_is_one_to_one_seeded_and_different_per_seed(benchmark: Benchmark) -> None:
    names = original_names(benchmark)
    mappings = [character_mapping(seed, names) for seed in SEEDS]
    for mapping in mappings:
        assert set(mapping) == names and len(set(mapping.values())) == len(names)
        assert set(mapping.values()) <= set(REPLACEMENT_NAMES)
    assert mappings[0] == character_mapping(1, sorted(names, reverse=True))  # order of discovery does not matter
    assert not set(FEMININE_NAMES) & set(MASCULINE_NAMES)
    # A name keeps its usual gender, so the pronouns a few cases use still fit: Ryan "sends a text with his phone".
    for name, pool in (("Ryan", MASCULINE_NAMES), ("Melissa", FEMININE_NAMES), ("Michael", MASCULINE_NAMES)):
        assert all(mapping[name] in pool for mapping in mappings)
    assert mappings[0] != mappings[1] != mappings[2] != mappings[0]
    assert character_mapping(0, names) == {}


@pytest.mark.parametrize("scene", SCENES)
def test_object_mapping_permutes_instances_within_labels_and_moves_every_shared_label(
    benchmark: Benchmark, scene: str
) -> None:
    records = benchmark.object_records(scene)
    by_label: dict[str, set[str]] = {}
    for record in records:
        by_label.setdefault(record.label, set()).add(record.name)
    mappings = [object_mapping(seed, scene, records) for seed in SEEDS]
    for mapping in mappings:
        assert set(mapping) == set(mapping.values()) == {r.name for r in records}  # a permutation
        for names in by_label.values():
            assert {mapping[name] for name in names} == names  # within its label
            assert all((mapping[name] == name) == (len(names) == 1) for name in names)  # all moved if shared
        assert any(new != old for old, new in mapping.items())  # never the identity on a scene
    assert mappings[0] == object_mapping(1, scene, reversed(records))
    assert mappings[0] != mappings[1] and mappings[1] != mappings[2]


def test_text_renaming_is_whole_word_and_one_pass() -> None:
    renaming = Renaming({"Jason": "Anouk", "chair_1": "chair_3", "chair_3": "chair_1", "table_1": "table_2"})
    text = 'Jason, Jasonville and Jason\'s chair_1 / chair_10 / armchair_1 / "chair_3" / table_12 / xJason'
    assert renaming.text(text) == (
        'Anouk, Jasonville and Anouk\'s chair_3 / chair_10 / armchair_1 / "chair_1" / table_12 / xJason'
    )
    assert renaming.inverse().text(renaming.text(text)) == text
    with pytest.raises(ValueError, match="one to one"):
        Renaming({"a_1": "a_2", "a_3": "a_2"})
    assert Renaming({}).text(text) == text


# --- the artefacts --------------------------------------------------------------------------------------------------
def test_case_json_is_renamed_everywhere(benchmark: Benchmark, perturbed_benchmark: Benchmark) -> None:
    characters = perturbed_benchmark.character_mapping
    for case_id, original in benchmark.cases.items():
        case = perturbed_benchmark.case(case_id)
        renaming = perturbed_benchmark.renaming(case.scene_name)
        dumped, before = case.model_dump_json(), original.model_dump_json()
        # Applied everywhere and one to one: the inverse gives back the file's case byte for byte.
        assert renaming.inverse().case(case) == original
        assert Renaming(renaming.mapping).case(original) == case
        # No original character is left, anywhere in the case; each appears under its new name.
        for name in case_character_names(original):
            assert not whole_word(name, dumped), (case_id, name)
            assert whole_word(characters[name], dumped)
        assert case_character_names(case) == [characters[n] for n in case_character_names(original)]
        # What holds no name is untouched.
        for field in ("id", "tags", "scene_name", "action_labels", "allow_null_plan"):
            assert getattr(case, field) == getattr(original, field)
        assert [(s.state, s.type, s.distraction_level) for s in case.current_states] == [
            (s.state, s.type, s.distraction_level) for s in original.current_states
        ]
        assert dumped != before


def test_expected_conditions_name_the_same_objects_under_their_new_names(
    benchmark: Benchmark, perturbed_benchmark: Benchmark
) -> None:
    moved = 0
    for case_id, original in benchmark.cases.items():
        case = perturbed_benchmark.case(case_id)
        old_scene, new_scene = load_scene(benchmark, case.scene_name), load_scene(perturbed_benchmark, case.scene_name)
        mapping, ids = (
            perturbed_benchmark.object_mapping(case.scene_name),
            perturbed_benchmark.id_mapping(case.scene_name),
        )
        for old, new in zip(original.expected_plans, case.expected_plans, strict=True):
            for field in ("relationships", "sampled_position"):
                before, after = getattr(old, field), getattr(new, field)
                if not isinstance(before, str):
                    assert after == before
                    continue
                old_ids = re.findall(r"\b[a-z_]+_\d+\b", before)
                new_ids = re.findall(r"\b[a-z_]+_\d+\b", after)
                assert new_ids == [mapping[name] for name in old_ids] and old_ids
                # Same box, same place: the judge scores the same geometry against the rewritten expectation.
                for a, b in zip(old_ids, new_ids, strict=True):
                    assert new_scene.box(b).id == ids[old_scene.box(a).id]
                    assert (new_scene.box(b).center == old_scene.box(a).center).all()
                moved += sum(a != b for a, b in zip(old_ids, new_ids, strict=True))
    assert moved > 0


def test_scene_objects_keep_their_geometry_under_new_ids_in_a_new_order(
    benchmark: Benchmark, perturbed_benchmark: Benchmark
) -> None:
    for scene_name in SCENES:
        mapping, ids = perturbed_benchmark.object_mapping(scene_name), perturbed_benchmark.id_mapping(scene_name)
        originals, renamed = benchmark.object_records(scene_name), perturbed_benchmark.object_records(scene_name)
        assert sorted(ids) == sorted(ids.values()) == [r.id for r in originals] == [r.id for r in renamed]
        assert any(old != new for old, new in ids.items())
        by_id = {r.id: r for r in renamed}
        strip = {"idx", "id"}
        for original in originals:  # the same object, renamed and renumbered
            record = by_id[ids[original.id]]
            assert record.name == mapping[original.name]
            assert record.model_dump(exclude=strip) == original.model_dump(exclude=strip)
        old, new = load_scene(benchmark, scene_name), load_scene(perturbed_benchmark, scene_name)
        # Scene order is the reference's rule (label, then id) on the new ids: the labels in the same order, the
        # instances of a label in another.
        assert [box.label for box in new.objects] == [box.label for box in old.objects]
        assert [box.id for box in new.objects] == [box.id for box in sorted(new.objects, key=lambda b: (b.label, b.id))]
        assert [box.center.tolist() for box in new.objects] != [box.center.tolist() for box in old.objects]
        assert set(new.by_name) == set(old.by_name)
        assert all(new.by_name[mapping[name]].id == ids[box.id] for name, box in old.by_name.items())


def test_scene_graph_is_the_same_graph_renamed(benchmark: Benchmark, perturbed_benchmark: Benchmark) -> None:
    for scene_name in SCENES:
        mapping = perturbed_benchmark.object_mapping(scene_name)
        old, new = (
            scene_graph_of(load_scene(benchmark, scene_name)),
            scene_graph_of(load_scene(perturbed_benchmark, scene_name)),
        )
        renamed = sorted(e._replace(target=mapping[e.target], anchor=mapping[e.anchor]) for e in old.edges)
        assert sorted(new.edges) == renamed and len(new.edges) == len(old.edges)
        original = json.loads(scene_graph_text(load_scene(benchmark, scene_name)))
        text = scene_graph_text(load_scene(perturbed_benchmark, scene_name))
        document = json.loads(text)
        renaming = Renaming(mapping)
        # The same facts about each object; the relations of one object come in the new scene order.
        expected = {mapping[name]: json.loads(renaming.text(json.dumps(e))) for name, e in original.items()}
        assert unordered(document) == unordered(expected)
        assert unordered(json.loads(renaming.inverse().text(text))) == unordered(original)
        # The listing is shuffled: the same objects, in an order that is not the renamed scene order.
        assert list(document) != [mapping[name] for name in original]
        assert list(document) != [box.name for box in load_scene(perturbed_benchmark, scene_name).objects]


def test_object_list_is_renamed_and_shuffled(benchmark: Benchmark, perturbed_benchmark: Benchmark) -> None:
    for scene_name in SCENES:
        mapping = perturbed_benchmark.object_mapping(scene_name)
        original = ast.literal_eval(object_list_text(load_scene(benchmark, scene_name)))
        listed = ast.literal_eval(object_list_text(load_scene(perturbed_benchmark, scene_name)))
        assert sorted(listed) == sorted(mapping[name] for name in original) and len(set(listed)) == len(listed)
        assert listed != [mapping[name] for name in original] and listed != original
        renamed_order = [box.name for box in load_scene(perturbed_benchmark, scene_name).objects]
        assert listed != renamed_order


def test_narratives_are_renamed_by_whole_ids_and_otherwise_unchanged(
    benchmark: Benchmark, perturbed_benchmark: Benchmark
) -> None:
    for scene_name in SCENES:
        renaming = perturbed_benchmark.renaming(scene_name)
        mapping = perturbed_benchmark.object_mapping(scene_name)
        for repeat in range(len(benchmark.description_files(scene_name))):
            original = benchmark.narrative_description(scene_name, repeat)
            text = perturbed_benchmark.narrative_description(scene_name, repeat)
            assert renaming.inverse().text(text) == original
            old_ids = re.findall(r'"([a-z_]+_\d+)"', original)
            assert re.findall(r'"([a-z_]+_\d+)"', text) == [mapping[name] for name in old_ids]
            assert any(mapping[name] != name for name in old_ids)
            # Everything but the quoted ids is the same text.
            assert re.sub(r"\b[a-z_]+_\d+\b", "ID", text) == re.sub(r"\b[a-z_]+_\d+\b", "ID", original)


def test_seed_zero_is_the_benchmark_itself(benchmark: Benchmark) -> None:
    plain = Benchmark.open(DATA, perturb=0)
    assert plain.cases == benchmark.cases and plain.listing_order("House") is None
    assert plain.renaming("House").mapping == {} and plain.character_mapping == {}
    assert load_scene(plain, "Office") is load_scene(benchmark, "Office")
    assert load_scene(plain, "Office").listed == load_scene(plain, "Office").objects


def test_the_same_seed_gives_the_same_benchmark_and_another_seed_another(benchmark: Benchmark) -> None:
    one, again, two = (Benchmark(DATA, seed) for seed in (1, 1, 2))
    assert one.cases == again.cases and one.cases != two.cases
    for scene_name in SCENES:
        assert one.object_mapping(scene_name) == again.object_mapping(scene_name)
        assert one.listing_order(scene_name) == again.listing_order(scene_name)
        assert one.object_mapping(scene_name) != two.object_mapping(scene_name)
        assert one.listing_order(scene_name) != two.listing_order(scene_name)
