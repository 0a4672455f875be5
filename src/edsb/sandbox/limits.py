"""What one run of model code may use, and what it runs against (picklable, sent to the worker with the code)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from edsb.errors import UsageError
from edsb.geometry.scene import Scene
from edsb.sandbox.code_api import ApiScene, LatestPlan
from edsb.settings.limits import CODE_MEMORY_MB, CODE_TIMEOUT_S
from edsb.settings.vocab import SANDBOXES as SANDBOXES
from edsb.settings.vocab import SandboxChoice as SandboxChoice
from edsb.settings.vocab import SandboxName as SandboxName


def choose_sandbox(choice: str) -> tuple[SandboxName, str | None]:
    """The sandbox a run gets for a `--sandbox` choice, and the one-line notice to print when `auto` falls back to
    `restricted`; UsageError for an unknown choice, or `exact` on a host that cannot contain it."""
    try:
        chosen = SandboxChoice(choice)
    except ValueError:
        choices = ", ".join(c.value for c in SandboxChoice)
        raise UsageError(f"unknown sandbox {choice!r} (choose {choices})") from None
    if chosen is SandboxChoice.RESTRICTED:
        return "restricted", None
    from edsb.sandbox.kernel import host_support  # the CLI imports this module at start: probe only when asked

    support = host_support()
    if support.exact:
        return "exact", None
    if chosen is SandboxChoice.EXACT:
        raise UsageError(
            f"--sandbox exact cannot run on this host: {support.reason} (use --sandbox restricted, or see "
            "`edsb sandbox check`)"
        )
    return "restricted", (
        f"the exact sandbox cannot run on this host ({support.reason}): model code runs in the restricted sandbox, "
        "which refuses some ordinary Python (see `edsb sandbox check`)"
    )


@dataclass(frozen=True)
class SandboxLimits:
    """Per-run limits, and which sandbox runs the code: `exact` (CPython's own `exec`, contained by the kernel) or
    `restricted` (RestrictedPython, the fallback where the kernel lacks Landlock or seccomp). One pool exists per
    distinct value. The default is `restricted` because it runs on every host; `edsb run` resolves its `auto`."""

    sandbox: SandboxName = "restricted"

    timeout: float = CODE_TIMEOUT_S  # wall-clock seconds for compiling and running the code
    memory_bytes: int = CODE_MEMORY_MB << 20  # address space of the worker process
    cpu_seconds: float | None = None  # CPU seconds per run (backstop for a stalled parent); None = timeout + 5
    max_result_bytes: int = 1 << 20  # JSON size of what the code set, printed text included
    # JSON size of the plan alone. Honest plans take a few hundred bytes. The parent's sampling work is bounded
    # apart, by the cost terms a plan needs (`planning.sampler.MAX_SAMPLING_TERMS`).
    max_plan_bytes: int = 16 << 10
    max_printed_chars: int = 1 << 16  # printed text kept (the rest is dropped)
    workers: int = 0  # runs at once per pool (and children forked ahead); 0 = one per usable core, at most 8

    @property
    def cpu_budget(self) -> float:
        return self.cpu_seconds if self.cpu_seconds is not None else self.timeout + 5.0


DEFAULT_LIMITS = SandboxLimits()


@dataclass(frozen=True)
class SceneSource:
    """A benchmark scene by data directory, name and perturbation seed; workers load and cache it themselves."""

    data_dir: str
    scene_name: str
    perturb: int = 0

    @classmethod
    def of(cls, data_dir: str | Path, scene_name: str, perturb: int = 0) -> SceneSource:
        # Absolute, since workers run in `/`; made so without touching the disk (`resolve` stats every part).
        return cls(os.path.abspath(data_dir), scene_name, perturb)


@dataclass(frozen=True)
class CodeContext:
    """What a run's API needs, in picklable form: the scene (by source; or a `Scene`, or an `ApiScene` with its own
    graph, e.g. built by a test) and each character's latest history plan (`Scenario.latest_plans`, used by
    `is_object_occupied`)."""

    scene: SceneSource | Scene | ApiScene
    latest_plans: tuple[tuple[str, LatestPlan], ...] = field(default=())
    # Seeds `random` and `numpy.random` in the run's fresh process, so that a run that draws numbers is reproducible
    # (every fork of the template would otherwise start from the same state, whatever the run).
    seed: int = 0

    @classmethod
    def create(
        cls, scene: SceneSource | Scene | ApiScene, latest_plans: Mapping[str, LatestPlan] | None = None, seed: int = 0
    ) -> CodeContext:
        return cls(scene, tuple((latest_plans or {}).items()), seed)

    @classmethod
    def for_benchmark(
        cls,
        data_dir: str | Path,
        scene_name: str,
        latest_plans: Mapping[str, LatestPlan] | None = None,
        perturb: int = 0,
        seed: int = 0,
    ) -> CodeContext:
        return cls.create(SceneSource.of(data_dir, scene_name, perturb), latest_plans, seed)
