"""Loads the official benchmark files from a data directory into typed models, with one-line errors."""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from edsb.data.location import CASES_DIR, resolve_data_dir
from edsb.data.models import SCENES, GridSettings, SceneBounds, SceneObjectRecord, TestCase
from edsb.data.perturb import (
    Renaming,
    case_character_names,
    character_mapping,
    check_seed,
    id_mapping,
    listing_order,
    object_mapping,
)
from edsb.errors import DataError, json_error_message, validation_message

M = TypeVar("M")

SCENES_DIR = Path("configs/scenes")
DESCRIPTIONS_SUBDIR = Path("descriptions/openai-gpt-4o-2024-08-06-0.1")
PROMPTS_DIR = Path("src/action_planning")


def read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read ({exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: invalid JSON ({json_error_message(exc)})") from None


def parse_file(path: Path, model: type[M]) -> M:
    data = read_json(path)
    try:
        return TypeAdapter(model).validate_python(data)
    except ValidationError as exc:
        raise DataError(f"{path}: {validation_message(exc)}") from None


class Benchmark:
    """The benchmark as found in one data directory. Files are read lazily and cached.

    `perturb` > 0 gives the robustness suite's version of it (`edsb.data.perturb`): cases, object records and
    narratives come out renamed, and the scene texts list objects in a shuffled order. 0 is the benchmark itself.
    """

    def __init__(self, root: Path, perturb: int = 0) -> None:
        self.root = Path(root)
        self.perturb = check_seed(perturb)
        self._narratives: dict[str, tuple[str, ...]] = {}
        self._renamings: dict[str, Renaming] = {}

    @cached_property
    def resolved_root(self) -> Path:
        """The absolute data directory, resolved once: every run names its scenes by it."""
        return self.root.resolve()

    @classmethod
    def open(
        cls, data: Path | str | None = None, *, perturb: int = 0, fetch: bool = False, offline: bool = False
    ) -> Benchmark:
        """The benchmark in the data directory `data` names (see `resolve_data_dir`), renamed by `perturb` when > 0.
        With `fetch`, a missing per-user copy is downloaded first (`ensure_data`; `offline` or `$EDSB_OFFLINE` forbids
        it): commands a user types fetch, internal re-opens (sandbox workers, resumed runs) never do."""
        check_seed(perturb)
        if fetch:
            from edsb.data.download import ensure_data

            root = ensure_data(data, offline=offline)
        else:
            root = resolve_data_dir(data)
        if not (root / CASES_DIR).is_dir():
            raise DataError(
                f"no benchmark data at {root} (expected {CASES_DIR}/ inside); run `edsb data fetch` "
                "or point --data / $EDSB_DATA at a copy"
            )
        return cls(root, perturb)

    # --- cases -----------------------------------------------------------------------------------------------
    def case_files(self) -> list[Path]:
        return sorted((self.root / CASES_DIR).glob("*/testcase_*.json"))

    @cached_property
    def cases(self) -> dict[int, TestCase]:
        """All cases by id, ascending (renamed when perturbed)."""
        if not self.perturb:
            return self.original_cases
        return {i: self.renaming(case.scene_name).case(case) for i, case in self.original_cases.items()}

    @cached_property
    def original_cases(self) -> dict[int, TestCase]:
        """The cases as the files hold them, whatever the perturbation."""
        found: dict[int, TestCase] = {}
        for path in self.case_files():
            case = parse_file(path, TestCase)
            expected_id = path.stem.removeprefix("testcase_")
            if str(case.id) != expected_id:
                raise DataError(f"{path}: id {case.id} does not match the file name")
            if case.id in found:
                raise DataError(f"{path}: duplicate case id {case.id}")
            found[case.id] = case
        if not found:
            raise DataError(f"{self.root / CASES_DIR}: no test cases found")
        return dict(sorted(found.items()))

    def case(self, case_id: int) -> TestCase:
        try:
            return self.cases[case_id]
        except KeyError:
            raise DataError(f"unknown case id {case_id}") from None

    # --- scenes ----------------------------------------------------------------------------------------------
    def scene_dir(self, scene: str) -> Path:
        if scene not in SCENES:
            raise DataError(f"unknown scene {scene!r} (expected one of {', '.join(SCENES)})")
        return self.root / SCENES_DIR / scene

    def object_records(self, scene: str) -> list[SceneObjectRecord]:
        """Objects in `id` order (how the reference builds them); scene order is the geometry layer's business.
        Perturbed: the same records with their instance numbers renamed and their ids renumbered, by the scene's
        mappings alone: loading a scene reads no test case (the sandbox's template loads scenes, and its forks' memory
        must hold no expected plan)."""
        records = self.original_object_records(scene)
        if not self.perturb:
            return records
        return Renaming(self.object_mapping(scene)).records(records, self.id_mapping(scene))

    def original_object_records(self, scene: str) -> list[SceneObjectRecord]:
        path = self.scene_dir(scene) / "objects.json"
        records = sorted(parse_file(path, list[SceneObjectRecord]), key=lambda r: r.id)
        if [r.id for r in records] != list(range(len(records))):
            raise DataError(f"{path}: object ids must be 0..{len(records) - 1}, each once")
        names = [r.name for r in records]
        if len(set(names)) != len(names):
            raise DataError(f"{path}: object names (label_idx) are not unique")
        return records

    def scene_bounds(self, scene: str) -> SceneBounds:
        return parse_file(self.scene_dir(scene) / "scene.json", SceneBounds)

    def grid_settings(self, scene: str) -> GridSettings:
        return parse_file(self.scene_dir(scene) / "grid_map.json", GridSettings)

    def description_files(self, scene: str) -> list[Path]:
        """Pre-generated narrative descriptions, name-sorted: index = repeat number."""
        return sorted((self.scene_dir(scene) / DESCRIPTIONS_SUBDIR).glob("description-*.txt"))

    def narrative_description(self, scene: str, repeat: int) -> str:
        texts = self._narratives.get(scene)
        if texts is None:
            texts = tuple(path.read_text(encoding="utf-8") for path in self.description_files(scene))
            if self.perturb:
                texts = tuple(map(self.renaming(scene).text, texts))
            self._narratives[scene] = texts
        if not 0 <= repeat < len(texts):
            raise DataError(
                f"{scene}: no narrative description for repeat {repeat} "
                f"(the benchmark ships {len(texts)}; narrative variants support at most {len(texts)} repeats)"
            )
        return texts[repeat]

    # --- perturbation ----------------------------------------------------------------------------------------
    @cached_property
    def character_mapping(self) -> dict[str, str]:
        """Original → replacement name of every character of every case (empty unperturbed)."""
        names = (name for case in self.original_cases.values() for name in case_character_names(case))
        return character_mapping(self.perturb, names)

    def object_mapping(self, scene: str) -> dict[str, str]:
        """Original → renamed object id of one scene (empty unperturbed)."""
        return object_mapping(self.perturb, scene, self.original_object_records(scene))

    def id_mapping(self, scene: str) -> dict[int, int]:
        """Original → renumbered record id of one scene's objects (empty unperturbed)."""
        return id_mapping(self.perturb, scene, [record.id for record in self.original_object_records(scene)])

    def renaming(self, scene: str) -> Renaming:
        """The mapping of a scene's cases and texts: every character and the scene's object ids (the identity
        unperturbed). The oracle is told it, since it answers as the benchmark's own planner."""
        renaming = self._renamings.get(scene)
        if renaming is None:
            mapping = self.character_mapping | self.object_mapping(scene) if self.perturb else {}
            renaming = self._renamings[scene] = Renaming(mapping)
        return renaming

    def listing_order(self, scene: str) -> tuple[int, ...] | None:
        """Record ids (renumbered) in the order the scene's object list and graph text show them; None: scene
        order."""
        if not self.perturb:
            return None
        ids = self.id_mapping(scene)
        return tuple(ids[i] for i in listing_order(self.perturb, scene, sorted(ids)))

    # --- prompt pack -----------------------------------------------------------------------------------------
    def prompt_file(self, relative: str | Path) -> Path:
        """A file of the official prompt pack, e.g. `narrator/system_messages/narrator.txt`."""
        path = self.root / PROMPTS_DIR / relative
        if not path.is_file():
            raise DataError(f"{path}: prompt file not found")
        return path
