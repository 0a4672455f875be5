"""The restricted sandbox, the fallback where the kernel cannot contain a process: RestrictedPython's compile and
guards (`policy`), the curated modules plan code may import (`modules`), and whose fault an exception is (`blame`).
The child calls `run_restricted` alone; the default path (`pool`, `worker`, `kernel`, `exact`, `wire`, `code_api`,
`source`, `limits`) reads without this package, and a template of the exact sandbox never imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edsb.sandbox.code_api import ApiScene

PRELOADED = ("RestrictedPython", "edsb.sandbox.restricted.run")  # what a restricted template imports before forking


def run_restricted(request: dict[str, Any], api_scene: ApiScene) -> dict[str, Any] | str:
    """One run of the request's code under the policy: the answer to send (a packed plan, the model's error, or a
    fault of edsb's)."""
    from edsb.sandbox.restricted.run import run_restricted as run

    return run(request, api_scene)
