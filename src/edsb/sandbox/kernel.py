"""Kernel containment for one run's child process (Linux): a private file view, descriptors, rlimits, an
unprivileged user, Landlock and seccomp, applied in a fixed order before any byte of the model's code runs.

The layers overlap on purpose, so that no single one is the boundary:
- file view (`view`): a mount namespace holding only the paths Landlock grants, so nothing else can even be looked up;
- descriptors: every one but the result channel closed, 0-2 on /dev/null (nothing inherited, output goes nowhere);
- rlimits: address space, CPU (SIGXCPU, then SIGKILL at the hard limit), no file growth, few descriptors, no cores;
  small thread stacks and one malloc arena, so that threads fit in the address space;
- privileges: a root worker drops to uid 65534 where the interpreter's files are readable by it (in the file view,
  whose directories above them anyone may search, or on the host), else keeps uid 0 with every capability dropped
  (it then owns root's files only as far as Landlock lets it reach them);
- Landlock: read-only on the interpreter's and libraries' directories and nothing else (no /proc, /tmp, /etc, home,
  data); TCP bind/connect, signals and abstract Unix sockets outside the domain refused where the ABI has them;
- seccomp: a default-deny allow-list; anything else returns EPERM (never a kill, so a denial is a Python
  exception); threads only (clone must carry CLONE_THREAD; clone3 gets ENOSYS so glibc falls back to clone); private
  mappings and private futexes only (no channel between runs); a syscall of another architecture kills the process.

`prepare()` builds the Landlock ruleset and the seccomp program once in the template, and with `view=True` moves the
template into the file view its children share; `contain()` in each forked child then only closes, limits and
loads. `contain()` without `prepare()` builds them itself (slower, same result). What this host offers is probed in
`host`, what a run may read is named in `reads`, and the rules are built in `rules`; this module applies them.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from edsb.sandbox.host import (
    MIN_LANDLOCK_ABI,
    PR_SET_SECCOMP,
    PROBE_ENV,
    RUN_UID_BASE,
    SECCOMP_MODE_FILTER,
    TASK_LIMIT,
    UNPRIVILEGED_ID,
    HostSupport,
    capabilities,
    drop_capabilities,
    host_support,
    load_libc,
    unshare_user,
)
from edsb.sandbox.rules import SECCOMP_ALLOW, Prepared, build_rules, child_streams
from edsb.sandbox.view import enter_view, entered, forget_proc, proc_fd

__all__ = [
    "MIN_LANDLOCK_ABI",
    "PROBE_ENV",
    "RUN_UID_BASE",
    "SECCOMP_ALLOW",
    "TASK_LIMIT",
    "UNPRIVILEGED_ID",
    "Containment",
    "ContainmentError",
    "HostSupport",
    "contain",
    "die_with_parent",
    "host_support",
    "prepare",
    "release",
]

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Containment:
    """What `contain` applies in a run's child. Every layer can be switched off, for the tests that prove each one
    is needed; the sandbox itself always asks for all that the host supports."""

    memory_bytes: int  # RLIMIT_AS
    cpu_seconds: int  # RLIMIT_CPU soft limit; the hard limit is a little above (SIGKILL after SIGXCPU)
    keep_fds: tuple[int, ...] = ()  # descriptors that stay open (the result channel); 0-2 are /dev/null
    max_tasks: int = TASK_LIMIT  # threads of the run, its own included (RLIMIT_NPROC over a real uid of its own)
    rlimits: bool = True
    drop_privileges: bool = True
    landlock: bool = True
    seccomp: bool = True
    close_fds: bool = True  # close all but keep_fds and put 0-2 on /dev/null
    parent: int | None = None  # the process the child dies with (`die_with_parent`), armed again after the drop
    view: bool = True  # a private file view, where the host can build one (built once by `prepare(view=True)`)


class ContainmentError(Exception):
    """A layer that was asked for could not be applied: the child must not run the code (fail closed)."""


OPEN_FILES_LIMIT = 64  # RLIMIT_NOFILE: lazy imports hold one or two at a time
CPU_GRACE_SECONDS = 1  # the hard CPU limit (SIGKILL) this far above the soft one (SIGXCPU)

_prepared: Prepared | None = None


def prepare(protected: Sequence[str] = (), *, view: bool = False) -> None:
    """Work done once in the template before it forks (the seccomp filter and the Landlock ruleset built; with
    `view`, this process moved into the private file view its children share, where the host can build one: after
    that it reads nothing outside the read paths either).

    `protected`: directories (the data directory) that no read rule may cover, on top of the usual secrets. It also
    reads the local time zone now, which glibc then keeps, since /etc is out of reach later."""
    global _prepared
    import time

    time.localtime()
    if _prepared is not None and _prepared.ruleset is not None:
        _prepared.ruleset.close()
    _prepared = build_rules(protected)
    if view and _prepared.view is not None and not entered():
        enter_view(_prepared.view)


def release() -> None:
    """Close what `prepare` built (its ruleset's descriptor), before the interpreter's exit tears modules down."""
    global _prepared
    if _prepared is not None and _prepared.ruleset is not None:
        _prepared.ruleset.close()
    _prepared = None


def die_with_parent(parent: int) -> None:
    """Be killed (SIGKILL) when the thread that started this process ends, and exit now if `parent` is already
    gone (it died before the request took effect: this process was then handed to another). Linux only."""
    if not sys.platform.startswith("linux"):
        return
    _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), "set the parent-death signal")
    if os.getppid() != parent:
        os._exit(1)


def contain(containment: Containment) -> None:
    """Apply the layers in the calling (single-threaded, freshly forked) process; ContainmentError if one fails."""
    c = containment
    support = host_support()
    if (c.landlock or c.seccomp) and not sys.platform.startswith("linux"):
        raise ContainmentError(f"no kernel sandbox on {sys.platform}")
    if c.landlock and (support.landlock_abi is None or support.landlock_abi < MIN_LANDLOCK_ABI):
        raise ContainmentError(f"Landlock ABI {MIN_LANDLOCK_ABI}+ is needed: {support.landlock_note}")
    if c.seccomp and not support.seccomp:
        raise ContainmentError(f"seccomp is needed: {support.seccomp_note}")
    if (c.landlock or c.seccomp or c.view) and _thread_count() != 1:  # they bind the calling thread only
        raise ContainmentError("contain() must run in a single-threaded process")
    built = _prepared if _prepared is not None else build_rules()  # before the drop: the rules open the paths
    ruleset_fd = built.ruleset.fileno() if built.ruleset is not None else -1
    try:
        if c.view and built.view is not None:  # planned where the host has both the view and Landlock
            _enter_view(built)
        if c.close_fds:
            _close_descriptors(c.keep_fds, ruleset_fd)
        if c.rlimits:
            _set_rlimits(c)
        if c.drop_privileges:
            _drop_privileges(support, built.capabilities, c.max_tasks if c.rlimits else None)
        if c.parent is not None:  # a change of user clears the parent-death signal; seccomp then refuses prctl
            die_with_parent(c.parent)
        _prctl(_PR_SET_NO_NEW_PRIVS, 1, "set no_new_privs")
        if c.landlock:
            _restrict_landlock(built)
        if c.seccomp:
            _load_seccomp(built)
    except ContainmentError:
        raise
    except Exception as exc:  # fail closed: whatever went wrong, the code must not run
        raise ContainmentError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        if built.ruleset is not None:
            built.ruleset.close()  # in a forked child: its own copy; the template keeps its descriptor


def _thread_count() -> int:
    """The tasks of this process: /proc/self/task, through the descriptor kept from before the view inside one."""
    proc = proc_fd()
    if proc is None:
        if entered():
            raise ContainmentError("cannot count this process's threads: contain() runs once per process")
        return len(os.listdir("/proc/self/task"))
    fd = os.open("self/task", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=proc)
    try:
        return len(os.listdir(fd))
    finally:
        os.close(fd)


def _enter_view(built: Prepared) -> None:
    """Layer 0: the private file view, entered by the template (or here, by a process that was not prepared with
    one), and checked: the host's /proc must not be found. The host's /proc descriptor is closed."""
    if not entered() and built.view is not None:
        enter_view(built.view)
    forget_proc()
    try:
        os.stat("/proc")
    except FileNotFoundError:
        return
    raise ContainmentError("the file view did not take effect: /proc can still be found")


def _close_descriptors(keep: tuple[int, ...], ruleset_fd: int) -> None:
    kept = sorted({fd for fd in (*keep, ruleset_fd) if fd >= 0} | {0, 1, 2})
    low = 0
    for fd in kept:
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 20)  # close_range(2): one syscall whatever the limit
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        if fd not in keep:
            os.dup2(null, fd)
    if null > 2:
        os.close(null)
    # Python's own streams onto those descriptors (a test runner's capture, say, may have used others); a stream
    # whose descriptor is kept (a channel) writes nowhere instead
    streams = _prepared.streams if _prepared is not None and not set(keep) & {0, 1, 2} else child_streams(keep)
    sys.stdin, sys.stdout, sys.stderr = streams


def _set_rlimits(c: Containment) -> None:
    import resource  # POSIX only: this module is imported on every platform

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the size limit is an OSError, not a kill
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES_LIMIT, OPEN_FILES_LIMIT))
    resource.setrlimit(resource.RLIMIT_CPU, (c.cpu_seconds, c.cpu_seconds + CPU_GRACE_SECONDS))
    resource.setrlimit(resource.RLIMIT_AS, (c.memory_bytes, c.memory_bytes))
    _room_for_threads()


# What each thread of a run costs in address space, which RLIMIT_AS counts: glibc gives a thread a stack of
# RLIMIT_STACK's size (8 MiB) and, up to eight per core, a malloc arena of its own (64 MiB reserved), so that only
# about 18 threads fitted in 1 GiB. A stack of 1 MiB (Python's own recursion limit stops far below it) and one
# malloc arena shared by all (the GIL serialises most allocation anyway) give a pool of 32 threads room: 32 MiB.
THREAD_STACK_BYTES = 1 << 20
MALLOC_ARENAS = 1
_M_ARENA_MAX = -8


def _room_for_threads() -> None:
    """Small thread stacks and one malloc arena, before model code starts a thread (MALLOC_ARENA_MAX in the
    environment is read at start-up only)."""
    import threading

    threading.stack_size(THREAD_STACK_BYTES)
    mallopt = _prepared.mallopt if _prepared is not None else load_libc().mallopt
    if mallopt(_M_ARENA_MAX, MALLOC_ARENAS) != 1:
        raise ContainmentError("cannot cap malloc's arenas")


def _drop_privileges(support: HostSupport, buffers: tuple[Any, Any], max_tasks: int | None) -> None:
    """No groups, no capabilities, uid 65534 where it can read the interpreter; and, with `max_tasks`, that many
    tasks at most (RLIMIT_NPROC) over a count of its own: a real uid nothing else has (root), or a user namespace
    (any other user; made before the limit is set, since the namespace keeps its creator's limit for the levels
    above it)."""
    import resource

    own_count = max_tasks is not None
    to_uid = support.drop_to_uid or (support.drop_in_view and entered())
    if os.geteuid() == 0:
        os.setgroups([])
        effective = UNPRIVILEGED_ID if to_uid else 0
        real = RUN_UID_BASE + os.getpid() if own_count and support.run_uid else effective
        if to_uid:
            os.setresgid(UNPRIVILEGED_ID, UNPRIVILEGED_ID, UNPRIVILEGED_ID)
        os.setresuid(real, effective, effective)  # root's real uid is exempt from RLIMIT_NPROC; this one is not
    elif own_count and support.user_namespace and not unshare_user():
        raise ContainmentError(f"cannot make a user namespace: {os.strerror(ctypes.get_errno())}")
    if max_tasks is not None and (support.run_uid or support.user_namespace):
        resource.setrlimit(resource.RLIMIT_NPROC, (max_tasks, max_tasks))
    if any(capabilities(buffers)):
        drop_capabilities()
    if any(capabilities(buffers)) or (to_uid and os.geteuid() != UNPRIVILEGED_ID):
        raise ContainmentError("the privilege drop did not take effect")


def _restrict_landlock(built: Prepared) -> None:
    if built.ruleset is None:
        raise ContainmentError("no Landlock ruleset was built")
    # The raw landlock_restrict_self(2) on the prepared ruleset's descriptor: `Ruleset.restrict` first checks its
    # flags with enum arithmetic, whose first use in a fresh child copies about 35 pages of the template (0.1 ms per
    # run); no flags are asked for, and no_new_privs is already set. The canary below checks that it took effect.
    from landlockpy import _syscall as landlock_syscall

    landlock_syscall.restrict_self(built.ruleset.fileno(), 0)
    try:  # canary: a best-effort no-op would still let the root directory open
        canary = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except PermissionError:
        return
    os.close(canary)
    raise ContainmentError("Landlock did not take effect: '/' can still be opened")


def _load_seccomp(built: Prepared) -> None:
    if built.fprog is None:
        raise ContainmentError("no seccomp program was built")
    if load_libc().prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(built.fprog), 0, 0) != 0:
        raise ContainmentError(f"cannot load the seccomp filter: {os.strerror(ctypes.get_errno())}")
    if load_libc().syscall(built.canary_syscall, 0) != -1:  # canary: a syscall outside the allow-list must now fail
        raise ContainmentError("seccomp did not take effect")


def _prctl(option: int, arg: Any, what: str) -> None:
    if load_libc().prctl(option, arg, 0, 0, 0) != 0:
        raise ContainmentError(f"cannot {what}: {os.strerror(ctypes.get_errno())}")
