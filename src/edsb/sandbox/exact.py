"""`--sandbox exact`: the model's code run by CPython's own `exec`, as the reference's executor runs it (§4.1):
the same textual rewrite, a fresh copy of the executor module's global names, a locals dict holding `self`, the
define / bind with `types.MethodType` / call steps, and the reference's spatial API, quirks and bugs included.

This module does not contain anything: it runs in a child that `edsb.sandbox.kernel.contain` has already locked down.

Interface agreed before the work was split (issue 29); the bodies are filled in by the exact branch.
"""

from __future__ import annotations

from collections.abc import Mapping

from edsb.sandbox.code_api import ApiScene, LatestPlan, PlanEntry


def run_exact(reply: str, scene: ApiScene, latest_plans: Mapping[str, LatestPlan]) -> list[PlanEntry]:
    """Run a reply's code the reference's way and return what it set, one entry per character in the order the
    reference's `parsed_event` holds them; CodeError (`edsb.sandbox.errors`) with the reference's exception text for
    every failure (all of them are the model's: the reference records any exception as an execution error)."""
    raise NotImplementedError
