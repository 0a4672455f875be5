"""The PI position sampler (docs/reference.md#position-sampler) on the real scenes: the official check passes for good
relationships, the cost follows the reference's cost table (docs/reference.md#position-sampler), the optimum is found
(`--sampler optimal`), the seat rule is exact, errors match the reference's. The reference's annealer has its own tests
in test_annealer.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from edsb.geometry.collision import floor_collisions, stands_on_floor
from edsb.geometry.distances import box_distance, directional_distance, interaction_distance, two_anchor_distance
from edsb.geometry.scene import Scene
from edsb.planning import sampler_lattice
from edsb.planning.sampler import sample_position
from edsb.planning.sampler_cost import compile_cost, position_cost, rewrite_relationships
from edsb.planning.sampler_start import SEAT_LABELS
from edsb.results import RunError
from edsb.scoring.conditions import iter_atoms, parse_condition
from edsb.scoring.judge import Judge

# What a good model answers for each PI case: the expected condition's atoms (id 63: its feasible branch).
GOOD_RELATIONSHIPS = {63: ["in front of couch_1", "in front of couch_3"]}


def sample(
    scene: Scene, relationships: list[str], seed: int = 0, sampler: str = "optimal", **kwargs: object
) -> tuple[float, float]:
    return sample_position(scene, relationships, rng=np.random.default_rng(seed), sampler=sampler, **kwargs)


def lattice(scene: Scene, step: float) -> np.ndarray:
    low, high = scene.allowed_xy
    xs, ys = (np.arange(low[i], high[i], step) for i in range(2))
    return np.stack(np.meshgrid(xs, ys, indexing="ij"), axis=-1).reshape(-1, 2).astype(np.float32)


def random_points(scene: Scene, count: int = 4000, seed: int = 7) -> np.ndarray:
    low, high = scene.allowed_xy
    return np.random.default_rng(seed).uniform(low, high, size=(count, 2)).astype(np.float32)


# --- the PI cases --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case_id", range(60, 70))
def test_good_relationships_pass_the_official_position_and_collision_check(benchmark, scenes, case_id) -> None:
    case = benchmark.case(case_id)
    condition = case.expected_plans[0].sampled_position
    relationships = GOOD_RELATIONSHIPS.get(case_id, [condition])
    assert set(relationships) <= set(iter_atoms(parse_condition(condition)))
    scene = scenes[case.scene_name]
    judge = Judge(case, 0, scene)

    points = np.array([sample(scene, relationships, seed) for seed in range(5)])

    assert judge.position_pass_mask(points).all()
    assert not floor_collisions(scene, points).any()
    assert (points.astype(np.float32) == points).all()  # float32 values, as the reference returns


def test_same_generator_gives_the_same_point_and_seeds_vary(scenes) -> None:
    relationships = ["in front of fridge_1"]
    points = [sample(scenes["House"], relationships, seed) for seed in range(6)]
    assert sample(scenes["House"], relationships, 3) == points[3]
    assert len(set(points)) > 1


# --- optimisation ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scene_name", "relationships", "feasible"),
    [
        ("House", ["in front of fridge_1", "behind fridge_1"], False),  # a compromise between two strips
        # empty seat rectangle: the infimum is never reached (docs/reference.md#empty-seat-rectangle)
        ("House", ["sit on couch_1"], False),
        ("House", ["between chair_1 and chair_3"], False),  # costs exp(0) = 1 at best
        ("Office", ["close to couch_3", "behind couch_3"], True),
        ("Restaurant", ["aligned with table_5 and bar_counter_1", "adjacent to table_5"], False),
        ("Restaurant", ["close to table_5", "to the left of bar_counter_1", "look at table_5"], True),
    ],
)
def test_sampled_point_is_at_least_as_good_as_a_dense_lattice(scenes, scene_name, relationships, feasible) -> None:
    scene = scenes[scene_name]
    cost = compile_cost(scene, relationships)
    best_on_lattice = cost(lattice(scene, 0.02)).min()

    value = cost([sample(scene, relationships)])[0]

    assert value <= best_on_lattice * (1 + 1e-6)
    assert (value == 0.0) == feasible


@pytest.mark.parametrize(
    ("scene_name", "relationship"), [("House", "in front of fridge_1"), ("Office", "to the right of cabinet_2")]
)
def test_optimal_points_clear_of_furniture_by_the_character_radius_win(scenes, scene_name, relationship) -> None:
    scene = scenes[scene_name]
    points = np.array([sample(scene, [relationship], seed) for seed in range(5)], dtype=np.float32)
    clearance = np.min([box_distance(box, points) for box in scene.objects if stands_on_floor(box)], axis=0)
    assert (clearance >= scene.grid.cylinder_radius - 0.05).all()  # up to the 5 cm lattice


def test_boundary_is_never_crossed_even_when_the_cost_pulls_outside(scenes) -> None:
    for scene in scenes.values():
        oriented = [box.name for box in scene.objects if box.has_orientation][:12]
        points = [sample(scene, [f"{side} {name}"]) for name in oriented for side in ("behind", "to the left of")]
        assert scene.within_allowed(np.array(points)).all()


def test_negative_margins_let_the_point_leave_the_scene_box(scenes) -> None:
    # x margin −0.501: the strip behind cabinet_3 lies entirely at x < 0 (docs/reference.md#negative-margins)
    office = scenes["Office"]
    points = np.array([sample(office, ["behind cabinet_3"], seed) for seed in range(3)])
    assert (points[:, 0] < office.bounds[0, 0]).all()
    assert office.within_allowed(points).all()
    assert (compile_cost(office, ["behind cabinet_3"])(points) == 0).all()


def test_without_object_anchors_the_point_is_free_and_reproducible(scenes) -> None:
    scene = scenes["Office"]
    for relationships in ([], ["look at Bob"], ["adjacent to Bob"]):
        point = sample(scene, relationships, 4, characters={"Bob"})
        assert point == sample(scene, relationships, 4, characters={"Bob"})
        assert scene.within_allowed(np.array([point]))[0]
        assert not floor_collisions(scene, np.array([point]))[0]


# --- the seat rule -------------------------------------------------------------------------------------------------


def test_sitting_on_a_chair_armchair_or_stool_uses_the_seat_point(benchmark, scenes) -> None:
    checked = 0
    for name, scene in scenes.items():
        for record in benchmark.object_records(name):
            if record.label not in SEAT_LABELS:
                continue
            center = np.array(record.center, dtype=np.float32)[:2]
            front = np.array(record.orientation, dtype=np.float32)[:2]
            expected = center + front * np.float32(record.depth * record.sit_offset_horizontal)
            for relationship in (f"sit on {record.name}", f"inside {record.name}"):
                assert sample(scene, [relationship]) == (float(expected[0]), float(expected[1]))
            checked += 1
    assert checked == 6 + 19 + 10


def test_lie_on_anything_uses_the_seat_point_of_the_first_sit_or_lie_relationship(scenes) -> None:
    house = scenes["House"]
    couch = house.by_name["couch_1"]
    x, y = couch.center[:2] + couch.front[:2] * np.float32(couch.depth * couch.sit_offset_horizontal)
    seat = (float(x), float(y))
    assert sample(house, ["lie on couch_1"]) == seat
    # the chair decides that the rule applies, the couch (first mentioned) where the character goes
    assert sample(house, ["look at fridge_1", "sit on couch_1", "sit on chair_1"]) == seat
    # once the rule applies nothing else is read, not even an unknown predicate
    assert sample(house, ["lie on couch_1", "hover"]) == seat


def test_sitting_on_a_couch_is_optimised_onto_the_seat_ignoring_collisions(scenes) -> None:
    office = scenes["Office"]
    point = np.array([sample(office, ["sit on couch_1"])], dtype=np.float32)
    assert interaction_distance(office.by_name["couch_1"], point)[0] == 0.0
    assert floor_collisions(office, point)[0]  # inside the couch: `sit on` switches collisions off

    # couch_1's seat rectangle is empty: the optimum hugs its front limit (docs/reference.md#empty-seat-rectangle)
    house = scenes["House"]
    point = np.array([sample(house, ["inside couch_1"])], dtype=np.float32)
    assert interaction_distance(house.by_name["couch_1"], point)[0] < 1e-4


# --- the cost ------------------------------------------------------------------------------------------------------


def test_rewriting_replaces_substrings() -> None:
    assert rewrite_relationships(["inside cabinet_1", "interact with fridge_1", "close to insidebox_1"]) == [
        "sit on cabinet_1",
        "adjacent to fridge_1",
        "close to sit onbox_1",
    ]


def test_cost_terms_follow_the_protocol_table(scenes) -> None:
    scene = scenes["House"]
    xy = random_points(scene)
    collisions = 100.0 * floor_collisions(scene, xy)
    fridge, couch, chair_1, chair_3 = (scene.by_name[n] for n in ("fridge_1", "couch_1", "chair_1", "chair_3"))

    def cost(*relationships: str) -> np.ndarray:
        return position_cost(scene, list(relationships), xy, characters={"Bob"})

    near = box_distance(fridge, xy)
    assert np.allclose(cost("adjacent to fridge_1"), collisions + np.where(near < 0.5, 0, np.exp((near - 0.5) / 5)))
    assert np.allclose(cost("close to fridge_1"), collisions + np.where(near < 1.0, 0, np.exp((near - 1.0) / 5)))
    ahead = directional_distance(fridge, xy, "in front of", 0.1)
    assert np.allclose(cost("in front of fridge_1"), collisions + np.where(ahead == 0, 0, np.exp(ahead / 5)))
    line = two_anchor_distance(chair_1.center, chair_3.center, xy, "between")
    assert np.allclose(cost("between chair_1 and chair_3"), collisions + np.exp(line / 5))
    seated = 100 * np.exp(interaction_distance(couch, xy) / 5)
    assert np.allclose(cost("sit on couch_1", "look at fridge_1"), seated)  # no collision term once seated
    assert np.array_equal(cost("look at fridge_1"), collisions)
    assert np.array_equal(cost("adjacent to Bob", "between Bob and chair_1", "in front of Bob"), collisions)
    assert np.array_equal(cost("in front of fridge_1", "close to the sofa_9"), cost("in front of fridge_1"))


def test_directions_of_unoriented_anchors_cost_nothing(scenes) -> None:
    office = scenes["Office"]
    xy = random_points(office)
    assert not office.by_name["stool_1"].has_orientation
    assert np.array_equal(position_cost(office, ["behind stool_1"], xy), 100.0 * floor_collisions(office, xy))


def test_cost_is_infinite_outside_the_allowed_area_only(scenes) -> None:
    for scene in scenes.values():
        (low_x, low_y), (high_x, high_y) = scene.allowed_xy
        inside = [[low_x + 0.001, low_y + 0.001], [high_x - 0.001, high_y - 0.001]]
        outside = [[low_x - 0.001, low_y + 1], [high_x + 0.001, low_y + 1], [low_x + 1, high_y + 0.001]]
        values = position_cost(scene, ["look at fridge_1"], np.array(inside + outside))
        assert np.isfinite(values[:2]).all()
        assert np.isinf(values[2:]).all()


# --- errors --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("relationships", "error"),
    [
        (["adjacent to sofa_9"], KeyError),
        (["between chair_1 and sofa_9"], KeyError),
        (["sit on sofa_9"], KeyError),
        (["close to the sofa_9"], KeyError),  # the start search reads the anchor even of an inexact predicate
        (["hover", "adjacent to sofa_9"], KeyError),  # the start search comes before scoring
        (["hover", "adjacent to fridge_1"], ValueError),
        (["stand near fridge_1"], ValueError),
        (["between chair_1"], ValueError),
        (["between the chair_1 and chair_3"], ValueError),
        (["sit on Bob"], AttributeError),
        (["lie on Bob"], AttributeError),
    ],
)
def test_what_the_reference_cannot_score_raises(scenes, relationships, error) -> None:
    with pytest.raises(error) as raised:
        sample(scenes["House"], relationships, characters={"Bob"})
    assert isinstance(raised.value, RunError)
    assert str(raised.value) == raised.value.args[0]  # a plain one-line message, not a quoted KeyError repr


def test_relationships_the_reference_never_reads_raise_nothing(scenes) -> None:
    """They are passed over: the sample is the one the readable relationship alone gives."""
    house = scenes["House"]
    for seed in range(3):
        alone = sample(house, ["in front of fridge_1"], seed)
        assert sample(house, ["look at nobody", "in front of fridge_1"], seed) == alone
        assert sample(house, ["in front of fridge_1", "close to the sofa_9"], seed) == alone  # inexact, after the start


# --- the search's shortcuts give the full search's answer ------------------------------------------------------------

SHORTCUT_CASES = [
    ("House", ["in front of fridge_1"]),
    ("House", ["adjacent to coffee_maker_1", "look at fridge_1"]),
    ("House", ["behind chair_1"]),
    ("Office", ["in front of couch_1", "in front of couch_3"]),
    ("Office", ["to the left of water_dispenser_1"]),
    ("Office", ["close to couch_3", "behind couch_3"]),
    ("Restaurant", ["behind reception_desk_1"]),
    ("Restaurant", ["close to table_5", "to the left of bar_counter_1", "look at table_5"]),
    ("Restaurant", ["in front of bar_counter_1", "behind bar_counter_1"]),  # no zero: the full search runs
]


@pytest.mark.parametrize(("scene_name", "relationships"), SHORTCUT_CASES)
def test_every_zero_cost_point_lies_in_the_zero_box(scenes, scene_name, relationships) -> None:
    scene = scenes[scene_name]
    cost = compile_cost(scene, relationships)
    points = np.concatenate([lattice(scene, 0.02), random_points(scene, 20_000)])
    zero = points[cost(points) == 0.0]
    assert cost.zero_box is not None
    assert ((zero >= cost.zero_box[0]) & (zero <= cost.zero_box[1])).all()


@pytest.mark.parametrize(("scene_name", "relationships"), SHORTCUT_CASES)
def test_the_zero_box_search_finds_what_the_whole_lattice_search_finds(scenes, scene_name, relationships) -> None:
    scene = scenes[scene_name]
    cost = compile_cost(scene, relationships)
    quick, full = sampler_lattice.search(cost), sampler_lattice.search(dataclasses.replace(cost, zero_box=None))
    assert (quick.point is None) == (full.point is None)
    assert np.array_equal(quick.candidates, full.candidates)
    if quick.point is not None:
        assert np.array_equal(quick.point, full.point)


def test_a_kept_search_result_gives_the_point_a_fresh_search_gives(scenes) -> None:
    office = scenes["Office"]
    relationships = ["to the right of cabinet_2"]
    kept = [sample(office, relationships, seed) for seed in range(4)]
    fresh = []
    for seed in range(4):
        sampler_lattice.optimum.cache_clear()
        fresh.append(sample(office, relationships, seed))
    assert kept == fresh


def test_clearance_by_disc_rows_is_the_disc_test() -> None:
    rng = np.random.default_rng(3)
    for shape, density in (((30, 40), 0.9), ((7, 90), 0.99), ((60, 5), 0.5)):
        optimal = rng.random(shape) < density
        for radius in (6.04, 6.28, 3.1, 2.0, 0.5):
            reach = int(np.floor(radius))
            padded = np.pad(optimal, reach)
            expected = optimal.copy()
            for di in range(-reach, reach + 1):
                for dj in range(-reach, reach + 1):
                    if di * di + dj * dj <= radius * radius:
                        expected &= padded[reach + di : reach + di + shape[0], reach + dj : reach + dj + shape[1]]
            assert np.array_equal(sampler_lattice._clear_of_worse(optimal, radius), expected)


def test_the_polish_seeds_are_the_stable_sort_s_first() -> None:
    values = np.random.default_rng(5).integers(0, 6, size=500).astype(np.float64)  # many ties
    values[::7] = np.inf
    for count in (1, 16, 100, 500, 600):
        assert np.array_equal(sampler_lattice._smallest(values, count), np.argsort(values, kind="stable")[:count])
