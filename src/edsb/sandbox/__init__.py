"""The sandbox: model-written plan code runs here, and only here, each run in a fresh child process forked from a
template that never held a key and never runs model code (`pool`, `worker`).

Two ways to run the code, chosen per run directory (`SandboxLimits.sandbox`, `--sandbox`): `exact`, CPython's own
`exec` as the reference's executor runs it (`exact`), contained by the kernel (`kernel`: descriptors, rlimits, an
unprivileged user, Landlock, seccomp); and `restricted`, RestrictedPython with a curated surface, for hosts without
those kernel layers, which also gets every layer the host has (the `restricted` subpackage, behind one call). Either
way the child loads its scene before it is contained, seeds `random` and `numpy.random` from the run's seed
(`seeds`), answers with bounded JSON of valid Unicode, never pickle (`child_answer`, `wire`), and is killed after its
answer: nothing a run changes reaches a later one. The parent checks the answer as untrusted data.

Modules of the default path: `pool` (the parent's side), `worker` (the template's and the child's), `kernel`
(containment, the host probe), `selfcheck` (`edsb sandbox check`), `exact` (the reference's `exec`), `child_answer`
(what a child sends), `seeds` (the random state a run's code sees), `wire` (frames and plain values), `code_api` (the
API the code calls), `provenance` (the marks that make an exception the model's, and where an edsb fault was raised),
`source` (finding and rewriting the code in a reply), `limits` (settings, the `--sandbox` choice, and inputs) and
`errors`. `restricted/`: `policy` and `modules` (RestrictedPython's rules, guards and importable modules), `blame`
(under `restricted`, an exception raised while the code ran is the model's execution error only if the model's code,
or its use of the API, caused it; a fault of edsb's own code is an `EdsbFault`: the run is incomplete, never counted
against the model) and `run`. Under `exact` every failure is the model's, as in the reference. This package imports
nothing from `planning`, `runner`, `report`, `llm` or the CLI.
"""

from typing import TYPE_CHECKING, Any

from edsb.sandbox.code_api import API_FUNCTIONS, ApiScene, Area, CodeApi, LatestPlan
from edsb.sandbox.errors import CodeError, EdsbFault, SandboxError, exception_text
from edsb.sandbox.limits import DEFAULT_LIMITS, CodeContext, SandboxLimits, SceneSource
from edsb.sandbox.provenance import fault_text
from edsb.sandbox.source import extract_code, prepare_code
from edsb.sandbox.wire import Opaque, Plain, RawCharacterPlan, RawPlan

if TYPE_CHECKING:
    from edsb.sandbox.pool import (
        SandboxPool,
        check_sandbox,
        execute_plan_code,
        kill_sandboxes_now,
        sandbox_threads,
        shutdown_sandboxes,
    )

_POOL = (
    "SandboxPool",
    "check_sandbox",
    "execute_plan_code",
    "kill_sandboxes_now",
    "sandbox_threads",
    "shutdown_sandboxes",
)


def __getattr__(name: str) -> Any:
    """The parent's side (`pool`: subprocess, threads, hashlib and so OpenSSL), imported on first use, so that the
    template, which imports `worker` through this package, stays small."""
    if name in _POOL:
        from edsb.sandbox import pool

        return getattr(pool, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "API_FUNCTIONS",
    "DEFAULT_LIMITS",
    "ApiScene",
    "Area",
    "CodeApi",
    "CodeContext",
    "CodeError",
    "EdsbFault",
    "LatestPlan",
    "Opaque",
    "Plain",
    "RawCharacterPlan",
    "RawPlan",
    "SandboxError",
    "SandboxLimits",
    "SandboxPool",
    "SceneSource",
    "check_sandbox",
    "exception_text",
    "execute_plan_code",
    "extract_code",
    "fault_text",
    "kill_sandboxes_now",
    "prepare_code",
    "sandbox_threads",
    "shutdown_sandboxes",
]
