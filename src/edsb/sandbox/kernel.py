"""Kernel containment for one run's child process (Linux): descriptors, rlimits, an unprivileged user, Landlock and
seccomp, applied in a fixed order before any byte of the model's code runs.

Interface agreed before the work was split (issue 29); the bodies are filled in by the kernel branch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HostSupport:
    """What this host's kernel offers, probed once per process: whether `--sandbox exact` can run here, and why not."""

    exact: bool  # every layer `contain` needs is available: the exact sandbox may run here
    reason: str  # one line: what is missing, or what is there
    landlock_abi: int | None  # None: no Landlock (not built in, not in the LSM list, refused by an outer filter)
    seccomp: bool
    user: str  # "root", or "uid N"; whether a root worker can drop to an unprivileged user

    def describe(self) -> list[str]:
        """Lines for `edsb sandbox check`."""
        raise NotImplementedError


def host_support() -> HostSupport:
    """Probe the kernel (cached; safe in any process, it enforces nothing)."""
    raise NotImplementedError


@dataclass(frozen=True)
class Containment:
    """What `contain` applies in a run's child. Every layer can be switched off, for the tests that prove each one
    is needed; the sandbox itself always asks for all that the host supports."""

    memory_bytes: int  # RLIMIT_AS
    cpu_seconds: int  # RLIMIT_CPU soft limit; the hard limit is a little above (SIGKILL after SIGXCPU)
    keep_fds: tuple[int, ...] = ()  # descriptors that stay open (the result channel); 0-2 are /dev/null
    rlimits: bool = True
    drop_privileges: bool = True
    landlock: bool = True
    seccomp: bool = True


class ContainmentError(Exception):
    """A layer that was asked for could not be applied: the child must not run the code (fail closed)."""


def prepare() -> None:
    """Work done once in the template before it forks (the seccomp filter and the Landlock ruleset built)."""
    raise NotImplementedError


def contain(containment: Containment) -> None:
    """Apply the layers in the calling (single-threaded, freshly forked) process; ContainmentError if one fails."""
    raise NotImplementedError
