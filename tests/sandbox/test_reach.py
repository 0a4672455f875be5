"""What a contained child can reach of edsb: none of its files, and in memory only what plan code needs. The template
imports everything a child uses before it forks, loads no data (the parent sends each scene already renamed), and
a run's request carries the reply, the scene's key, the history and the limits, nothing more."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import edsb
from edsb.data.benchmark import Benchmark
from edsb.sandbox import CodeContext, CodeError, SandboxLimits, SandboxPool
from edsb.sandbox.kernel import host_support
from tests.support.kernel_sandbox import require_kernel_sandbox

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the kernel sandbox is Linux's")

PACKAGE = Path(edsb.__file__).parent


def exact_limits() -> SandboxLimits:
    require_kernel_sandbox()
    return SandboxLimits(sandbox="exact", timeout=5.0, workers=1)


def printed(exact_pool: SandboxPool, body: str, context: CodeContext) -> str:
    inner = "".join(f"    {line}\n" for line in body.strip("\n").splitlines())
    return exact_pool.execute(f"def parse_event():\n{inner}", context).output


def failure(exact_pool: SandboxPool, body: str, context: CodeContext) -> str:
    with pytest.raises(CodeError) as caught:
        printed(exact_pool, body, context)
    return caught.value.message


@pytest.fixture(scope="module")
def exact_pool() -> SandboxPool:
    with SandboxPool(exact_limits()) as exact_pool:
        yield exact_pool


@pytest.fixture(scope="module")
def perturbed_house(benchmark: Benchmark) -> CodeContext:
    return CodeContext.for_benchmark(benchmark.root, "House", perturb=7, seed=3)


@pytest.mark.parametrize(
    "body",
    [
        f"open({str(PACKAGE / 'llm' / 'oracle' / 'answers.py')!r}).read()",
        f"open({str(PACKAGE / 'sandbox' / 'pool.py')!r}).read()",
        f"open({str(PACKAGE / '__init__.py')!r}).read()",
        "import edsb.llm.oracle",
        "import edsb.llm",
        "import importlib.resources\nimportlib.resources.files('edsb').joinpath('__init__.py').read_text()",
        "import pkgutil\npkgutil.get_data('edsb', '__init__.py')",
        # the site-packages beside numpy may be listed (through the standard library's listing rule, where it lies
        # inside it), but nothing in it is read: its `.pth` files and modules, edsb's editable hook among them
        "import os\nd = os.path.dirname(os.path.dirname(np.__file__))\n"
        "open(os.path.join(d, sorted(n for n in os.listdir(d) if n.endswith(('.pth', '.py')))[0])).read()",
    ],
)
def test_no_file_of_edsb_is_readable(exact_pool: SandboxPool, perturbed_house: CodeContext, body: str) -> None:
    """Landlock refuses to open them; in the private file view they are not even there (nor anything but numpy in
    the site-packages, so the last body finds no file to try)."""
    assert (PACKAGE / "llm" / "oracle" / "answers.py").is_file()
    view = ("FileNotFoundError", "ModuleNotFoundError", "IndexError")
    expected = view if host_support().view else ("PermissionError",)
    assert failure(exact_pool, body, perturbed_house).startswith(expected), failure(exact_pool, body, perturbed_house)


def test_numpy_and_the_standard_library_still_import(exact_pool: SandboxPool, perturbed_house: CodeContext) -> None:
    body = "import fractions, numpy.polynomial as p\nprint(fractions.Fraction(1, 3) + 1, p.Polynomial([1]).degree())"
    assert printed(exact_pool, body, perturbed_house) == "4/3 0\n"


def test_the_template_holds_no_answer_and_no_data(exact_pool: SandboxPool, perturbed_house: CodeContext) -> None:
    """Its modules: no oracle, no loader of the data, no perturbation, none of edsb's other libraries (nor, for the
    exact sandbox, RestrictedPython); the request and every frame: no seed of the perturbation, no data directory."""
    body = """import sys, json, gc
TOPS = ('edsb', 'pydantic', 'aiohttp', 'rich', 'typer', 'httpx', 'RestrictedPython', 'openai', 'anthropic')
frames, f = [], sys._getframe()
while f is not None:
    frames.append(repr(f.f_locals)[:3000])
    f = f.f_back
print(json.dumps({'modules': [m for m in sys.modules if m.split('.')[0] in TOPS], 'frames': frames}))"""
    seen = json.loads(printed(exact_pool, body, perturbed_house))
    modules = set(seen["modules"])
    assert "edsb.sandbox.exact" in modules
    assert not {m for m in modules if m.startswith(("edsb.llm", "edsb.runner", "edsb.planning", "edsb.data."))}
    assert not {m for m in modules if not m.startswith("edsb")}  # no pydantic, aiohttp, rich, typer, SDKs, ...
    text = "\n".join(seen["frames"])
    assert "'reply'" in text  # the request was among the frames walked
    assert "perturb" not in text and str(Path(str(perturbed_house.scene.data_dir))) not in text  # type: ignore[union-attr]
