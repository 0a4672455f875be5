"""Run keys: one benchmark run = (variant, case, distraction level, repeat), expanded in the reference's order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from edsb.data.models import SCENES, TestCase


@dataclass(frozen=True, order=True)
class RunKey:
    variant: str
    case: int
    distraction: int
    repeat: int

    @property
    def id(self) -> str:
        """Stable identifier: `<variant>/tc<id>-d<level>-r<repeat>` (the reference's run name, plus the variant)."""
        return f"{self.variant}/tc{self.case:02d}-d{self.distraction}-r{self.repeat}"

    @classmethod
    def from_id(cls, text: str) -> RunKey:
        variant, run = text.split("/", 1)
        case, level, repeat = run.split("-")
        return cls(variant, int(case.removeprefix("tc")), int(level.removeprefix("d")), int(repeat.removeprefix("r")))


def expand_keys(
    variants: Iterable[str],
    case_ids: Iterable[int],
    levels: Iterable[int],
    repeats: int,
    cases: Mapping[int, TestCase],
) -> list[RunKey]:
    """Keys in the reference's loop order: per variant, scenes House/Office/Restaurant, ids ascending, then each
    requested level up to the case's max, then each repeat. Levels above a case's max are skipped, as there."""
    wanted = sorted(set(case_ids))
    keys: list[RunKey] = []
    for variant in variants:
        for scene in SCENES:
            for cid in wanted:
                case = cases[cid]
                if case.scene_name != scene:
                    continue
                for level in sorted(set(levels)):
                    if level > case.max_distraction:
                        continue
                    keys.extend(RunKey(variant, cid, level, repeat) for repeat in range(repeats))
    return keys
