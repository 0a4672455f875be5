"""The unit of work: one benchmark run = (variant, case, distraction level, repeat)."""

from __future__ import annotations

from dataclasses import dataclass


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
