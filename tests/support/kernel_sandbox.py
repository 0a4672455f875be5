"""The kernel sandbox in tests: skip where the host lacks a layer, unless CI says this host must have them all."""

from __future__ import annotations

import os

import pytest

from edsb.sandbox.kernel import MIN_LANDLOCK_ABI, host_support

REQUIRE_ENV = "EDSB_REQUIRE_KERNEL_SANDBOX"  # "1": a missing layer fails the test instead of skipping it


def require_kernel_sandbox() -> None:
    """Skip (with the reason) on a host without every layer `contain` needs; fail instead under $EDSB_REQUIRE_...=1."""
    support = host_support()
    if support.exact:
        return
    reason = f"kernel sandbox unavailable here: {support.reason}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1)")
    pytest.skip(reason)


def landlock_abi() -> int:
    abi = host_support().landlock_abi
    return abi if abi is not None else MIN_LANDLOCK_ABI - 1
