"""Running plan code in a real sandbox pool the way the security tests read it back: a body wrapped in
`parse_event`, and the verdict as (kind, message), where an edsb fault fails the test."""

from __future__ import annotations

import pytest

from edsb.sandbox import CodeContext, CodeError, EdsbFault, SandboxLimits, SandboxPool

#: Short limits, so attacks that hang or grow end quickly; two workers, as on the CI machine.
LIMITS = SandboxLimits(timeout=3.0, memory_bytes=512 << 20, workers=2)


def body_code(body: str) -> str:
    """A program whose `parse_event` holds `body`."""
    return "def parse_event():\n" + "".join(f"    {line}\n" for line in body.strip("\n").splitlines())


def verdict(pool: SandboxPool, context: CodeContext, code: str) -> tuple[str, str]:
    """(kind, message) of a failing program, or ("ok", printed text); an edsb fault fails the test."""
    try:
        raw = pool.execute(code, context)
    except CodeError as exc:
        return str(exc.kind), exc.message
    except EdsbFault as fault:  # pragma: no cover - what the security tests exist to catch
        pytest.fail(f"blamed on edsb: {fault}")
    return "ok", raw.output
