"""The fixed words of a run's settings, each spelled once: the variants, presets, samplers, sandboxes and the
reasoning levels. Every layer imports them from here (the packages that act on them re-export them)."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, TypeAlias

# The spelling of "send no temperature" on the command line and in a config file (TOML has no null).
PROVIDER_DEFAULT = "default"
PAPER_TEMPERATURE = 0.1


class VariantName(StrEnum):
    """The framework and the paper's ablations (Tables 1 and 2)."""

    OURS = "ours"
    WO_EVENT = "wo-event"
    OBJECT_LIST = "object-list"
    SCENE_GRAPH = "scene-graph"
    DIRECT = "direct"


class PresetName(StrEnum):
    TABLE1 = "table1"
    TABLE2 = "table2"


class SamplerName(StrEnum):
    """How PI positions are sampled (`--sampler`): the reference's simulated annealing (the default, the paper's
    numbers), or edsb's lattice search that always returns an optimal point (a ceiling, not the paper's)."""

    REFERENCE = "reference"
    OPTIMAL = "optimal"


SandboxName: TypeAlias = Literal["exact", "restricted"]
SANDBOXES: tuple[SandboxName, ...] = ("exact", "restricted")


class SandboxChoice(StrEnum):
    """Which sandbox runs the model's code (`--sandbox`): `exact` runs it with CPython's own `exec`, as the
    reference does, contained by the kernel (Landlock, seccomp, rlimits); `restricted` runs it under RestrictedPython,
    for hosts without those layers (it refuses some ordinary Python); `auto` picks `exact` where the host has them."""

    AUTO = "auto"
    EXACT = "exact"
    RESTRICTED = "restricted"


class ReasoningEffort(StrEnum):
    """OpenAI's `reasoning_effort` and Anthropic's effort, as their APIs name the levels."""

    NONE = "none"
    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    XHIGH = "xhigh"
    MAX = "max"


class ThinkingLevel(StrEnum):
    """Gemini 3's `thinkingLevel`."""

    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
