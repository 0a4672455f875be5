"""The numbers behind the limit settings, for the modules that apply them without pydantic (the sandbox template
imports `planning.plans`, `edsb.text` and `sandbox.limits` and must not import pydantic): the declaration in `run`
takes its defaults from here, and so do `PlanLimits`, `TextLimits` and `SandboxLimits`."""

from __future__ import annotations

from typing import Final

PLAN_CHARACTERS: Final = 64  # characters in a plan
PLAN_RELATIONSHIPS: Final = 64  # relationships (position and orientation conditions) per character
PLAN_STRING_CHARS: Final = 1_000  # characters of any one string: a name, an action, a condition
ERROR_CHARS: Final = 4_000  # an error message kept in a result: `<kind>: <message>`
TEXT_CHARS: Final = 2_000  # each string a result takes from a reply
CODE_TIMEOUT_S: Final = 10.0  # wall-clock seconds for compiling and running model code
CODE_MEMORY_MB: Final = 1024  # address space of the process that runs it, MiB
RESPONSE_MB: Final = 16  # a model server's reply, MiB (larger ones fail)
CHECK_TIMEOUT_S: Final = 60.0  # `edsb check-model`'s wait for its one answer, seconds
