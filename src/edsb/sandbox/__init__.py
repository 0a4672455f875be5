"""The sandbox: model-written plan code runs here, and only here, in RestrictedPython inside resource-limited worker
processes.

The security boundary. Model code can reach: the spatial code API (`code_api`: the functions of the official prompt,
called on a per-run object whose scene data sits behind underscore names), `Area`, a short list of harmless builtins
and exceptions, per-run views of `math`, `re`, `itertools`, `typing` and a curated `numpy` (`np`, `re` and `List`
pre-bound, as in the reference's executor), checked `str.format`, plain classes of its own, and a capped
`print` (`policy`, `modules`). It cannot reach: imports of anything else, a real class of edsb or numpy (`type()`
hands out a stand-in that cannot construct an API object), names or attributes starting with `_`, numpy's file,
memory and pickle functions or object arrays, files, the environment (the worker is forked from a template process
that started without the parent's variables and never runs model code, and scrubs `os.environ` again before each
run), the parent's memory (it runs in another process and answers with bounded JSON of valid Unicode, never pickle:
`wire`), more than its memory, CPU and wall-clock limits (`limits`, enforced by the worker and by the `pool`, which
kills it), or a later run (namespace, API object, builtins and views are rebuilt per run, and what a run leaves
behind is collected before its answer is sent; only compiled programs, which are immutable, are reused: `worker`).

Modules: `pool` (the parent's side), `worker` (the child's), `wire` (frames and plain values between them),
`policy` (RestrictedPython rules and guards), `modules` (the importable modules and the class stand-ins),
`code_api` (the API the code calls), `source` (finding and rewriting the code in a reply), `limits` (settings and
inputs), `errors`, and `blame`: an exception raised while the code ran is the model's execution error only if the
model's code, or its use of the API, caused it; a fault of edsb's own code is an `EdsbFault` (the run is incomplete,
never counted against the model). This package imports nothing from `planning`, `runner`, `report`, `llm` or the CLI.
"""

from edsb.sandbox.blame import fault_text
from edsb.sandbox.code_api import API_FUNCTIONS, ApiScene, Area, CodeApi, LatestPlan
from edsb.sandbox.errors import CodeError, EdsbFault, SandboxError, exception_text
from edsb.sandbox.limits import DEFAULT_LIMITS, CodeContext, SandboxLimits, SceneSource
from edsb.sandbox.pool import SandboxPool, check_sandbox, execute_plan_code, sandbox_threads, shutdown_sandboxes
from edsb.sandbox.source import extract_code, prepare_code
from edsb.sandbox.wire import Opaque, Plain, RawCharacterPlan, RawPlan

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
    "prepare_code",
    "sandbox_threads",
    "shutdown_sandboxes",
]
