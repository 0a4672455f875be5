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
`host`, and what a run may read is named in `reads`.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
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
    capability_buffers,
    drop_capabilities,
    host_support,
    load_libc,
    unshare_user,
)
from edsb.sandbox.reads import PLAN_LIBRARIES, SITE_DIRECTORIES, listed_paths, read_paths
from edsb.sandbox.view import ViewPlan, enter_view, entered, forget_proc, plan_view, proc_fd

__all__ = [
    "MIN_LANDLOCK_ABI",
    "PROBE_ENV",
    "RUN_UID_BASE",
    "TASK_LIMIT",
    "UNPRIVILEGED_ID",
    "Containment",
    "ContainmentError",
    "HostSupport",
    "contain",
    "host_support",
    "prepare",
    "release",
]

# The seccomp allow-list: every syscall a contained run may make; all others fail with EPERM. Measured on x86_64
# (Debian 12, glibc 2.36, CPython 3.11, numpy 2.4) with `strace -f` on a forked child after warm imports, running
# honest plan code: lazy imports of random, copy, logging, dataclasses, collections, json, math, itertools, types,
# re, statistics, decimal, fractions, datetime, traceback; numpy matmul, linalg (inv, eig, svd, solve), random and
# printing; a thread and a thread pool; print to stdout and stderr; the time calls; a MemoryError; then the reply on
# the channel. Widened by what glibc or the kernel use in the same roles on other setups (statx, the legacy x86 names,
# pread/readv, the poll family for the channel) and by the time calls, which the vDSO may turn into real syscalls.
# Names missing on an architecture are skipped. Argument-checked calls (clone, ioctl, fcntl, prlimit64) are added
# below.
SECCOMP_ALLOW: tuple[str, ...] = (
    # files the Landlock rules let it open, and descriptors it holds
    "read", "readv", "pread64", "preadv", "preadv2", "write", "writev", "lseek", "close",
    "stat", "fstat", "lstat", "newfstatat", "statx", "getdents64", "readlink", "readlinkat",
    "access", "faccessat", "faccessat2", "getcwd", "dup", "dup2", "dup3",
    # the result channel (a connected socket inherited from the parent); sendto and sendmsg below, without MSG_OOB
    "recvfrom", "recvmsg", "getsockopt", "getsockname", "getpeername",
    "poll", "ppoll", "select", "pselect6",
    # memory
    "munmap", "mremap", "brk", "madvise", "mbind", "get_mempolicy",
    # threads and their synchronisation (futex below: private ones only)
    "set_robust_list", "get_robust_list", "rseq", "set_tid_address", "sched_yield", "sched_getaffinity",
    "gettid", "getpid", "getppid", "exit", "exit_group", "restart_syscall",
    # signals of its own (sending one to any process is not in the list)
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
    # time (the vDSO may fall back to these)
    "clock_gettime", "clock_getres", "gettimeofday", "time", "nanosleep", "clock_nanosleep",
    # facts about itself
    "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups", "uname", "sysinfo",
    "getrlimit", "getrusage", "times", "getrandom",
)  # fmt: skip

_CLONE_THREAD = 0x00010000

_MSG_OOB = 0x1

_O_PATH = 0o10000000

_PROT_EXEC = 0x4

_MAP_ANONYMOUS = 0x20

_MAP_TYPE = 0x03  # MAP_SHARED 1, MAP_PRIVATE 2, MAP_SHARED_VALIDATE 3

_MAP_PRIVATE = 0x02

_FUTEX_PRIVATE_FLAG = 128

_CLONE_NAMESPACES = 0x7E020000  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET

# fcntl: descriptor flags and duplication only; F_SETOWN and F_SETSIG would let SIGIO signal another process
_FCNTL_ALLOWED = (0, 1, 2, 3, 4, 1030)  # F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC

# ioctl: isatty (TCGETS), TIOCGWINSZ, FIONCLEX, FIOCLEX, FIONREAD, and FIONBIO (a socket's timeout or blocking mode)
_IOCTL_ALLOWED = (0x5401, 0x5413, 0x5450, 0x5451, 0x541B, 0x5421)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def child_streams(keep: Iterable[int] = ()) -> list[Any]:
    """Text streams on descriptors 0-2 (those in `keep` replaced by /dev/null); they live as long as the process."""
    return [
        open(fd if fd not in keep else os.devnull, "r+" if fd == 0 else "w", closefd=fd in keep) for fd in (0, 1, 2)
    ]


@dataclass
class Prepared:
    ruleset: Any  # landlockpy.Ruleset holding its descriptor, or None where Landlock is not used
    seccomp_program: bytes | None  # the compiled BPF program; None where seccomp is not used
    canary_syscall: int = -1  # getpgid: harmless, outside the allow-list, on every architecture
    streams: list[Any] = field(default_factory=child_streams)  # sys.stdin/out/err for the child, made once
    fprog: Any = None  # the program as the kernel takes it (struct sock_fprog over a buffer it keeps alive)
    buffer: Any = None
    capabilities: tuple[Any, Any] = field(default_factory=capability_buffers)  # capget(2)'s, for `contain`
    view: ViewPlan | None = None  # the private file view of the read paths; None where the host cannot build one
    mallopt: Any = field(default_factory=lambda: load_libc().mallopt)  # looked up once, not in every child

    def __post_init__(self) -> None:
        if self.seccomp_program is not None:
            self.buffer = ctypes.create_string_buffer(self.seccomp_program, len(self.seccomp_program))
            self.fprog = _SockFprog(len(self.seccomp_program) // 8, ctypes.cast(self.buffer, ctypes.c_void_p))


def build_ruleset(abi: int, paths: Sequence[str], listed: Sequence[str] = ()) -> Any:
    """A Landlock ruleset handling every right this ABI knows, granting only reads beneath `paths`, and listing
    (names, never contents) beneath `listed` (strict: the library may not silently drop a right we ask for)."""
    from landlockpy import AccessFS, Ruleset, Scope, fs_for_abi, net_for_abi, scope_for_abi

    ruleset = Ruleset(
        handled_fs=fs_for_abi(abi),
        handled_net=net_for_abi(abi),
        scoped=scope_for_abi(abi) & (Scope.SIGNAL | Scope.ABSTRACT_UNIX_SOCKET),
        best_effort=False,
    )
    try:
        for path in paths:
            access = AccessFS.READ_FILE | AccessFS.READ_DIR if os.path.isdir(path) else AccessFS.READ_FILE
            ruleset.allow_path(path, access)
        for path in listed:
            ruleset.allow_path(path, AccessFS.READ_DIR)
    except BaseException:
        ruleset.close()
        raise
    return ruleset


def _build_seccomp_filter() -> Any:
    import pyseccomp as seccomp

    rules = seccomp.SyscallFilter(seccomp.ERRNO(errno.EPERM))
    rules.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)
    native = seccomp.system_arch()

    def known(name: str) -> bool:
        return bool(seccomp.resolve_syscall(native, name) >= 0)

    for name in SECCOMP_ALLOW:
        if known(name):
            rules.add_rule(seccomp.ALLOW, name)
    # threads only: CLONE_THREAD set and no namespace flag; clone3 hides its flags in memory, so it answers ENOSYS
    # and glibc falls back to clone.
    rules.add_rule(
        seccomp.ALLOW, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, _CLONE_THREAD | _CLONE_NAMESPACES, _CLONE_THREAD)
    )
    if known("clone3"):
        rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for request in _IOCTL_ALLOWED:
        rules.add_rule(seccomp.ALLOW, "ioctl", seccomp.Arg(1, seccomp.EQ, request))
    for command in _FCNTL_ALLOWED:
        rules.add_rule(seccomp.ALLOW, "fcntl", seccomp.Arg(1, seccomp.EQ, command))
    # opening files, never as O_PATH (a handle that Landlock does not check: it would tell a fenced file exists)
    rules.add_rule(seccomp.ALLOW, "openat", seccomp.Arg(2, seccomp.MASKED_EQ, _O_PATH, 0))
    if known("open"):
        rules.add_rule(seccomp.ALLOW, "open", seccomp.Arg(1, seccomp.MASKED_EQ, _O_PATH, 0))
    # memory: private mappings only (a page shared with another run's mapping of the same file would be a channel
    # between runs), never executable unless mapped from a file (a shared library): no shellcode pages, no JIT
    private = seccomp.Arg(3, seccomp.MASKED_EQ, _MAP_TYPE, _MAP_PRIVATE)
    rules.add_rule(seccomp.ALLOW, "mmap", seccomp.Arg(2, seccomp.MASKED_EQ, _PROT_EXEC, 0), private)
    rules.add_rule(seccomp.ALLOW, "mmap", seccomp.Arg(3, seccomp.MASKED_EQ, _MAP_ANONYMOUS | _MAP_TYPE, _MAP_PRIVATE))
    # futexes keyed by this process alone: a shared one is keyed by the file and offset it lies in, so that a wait in
    # one run could be woken by another (glibc's locks, condition variables and semaphores of one process are private)
    rules.add_rule(seccomp.ALLOW, "futex", seccomp.Arg(1, seccomp.MASKED_EQ, _FUTEX_PRIVATE_FLAG, _FUTEX_PRIVATE_FLAG))
    rules.add_rule(seccomp.ALLOW, "mprotect", seccomp.Arg(2, seccomp.MASKED_EQ, _PROT_EXEC, 0))
    # sending on the channel, but never out-of-band data (the parent's poll() would report a byte no read returns)
    rules.add_rule(seccomp.ALLOW, "sendto", seccomp.Arg(3, seccomp.MASKED_EQ, _MSG_OOB, 0))
    rules.add_rule(seccomp.ALLOW, "sendmsg", seccomp.Arg(2, seccomp.MASKED_EQ, _MSG_OOB, 0))
    # reading its own limits (resource.getrlimit), never setting any
    rules.add_rule(seccomp.ALLOW, "prlimit64", seccomp.Arg(0, seccomp.EQ, 0), seccomp.Arg(2, seccomp.EQ, 0))
    return rules


def _compile(rules: Any) -> bytes:
    """The filter's BPF program, so that each child loads it without compiling."""
    fd = os.memfd_create("edsb-seccomp", os.MFD_CLOEXEC)
    try:
        with open(fd, "w+b", closefd=False) as handle:
            rules.export_bpf(handle)
            handle.seek(0)
            return handle.read()
    finally:
        os.close(fd)


def build_rules(protected: Sequence[str] = ()) -> Prepared:
    support = host_support()
    ruleset = view = None
    if support.landlock_abi is not None and support.landlock_abi >= MIN_LANDLOCK_ABI:
        read, listed = read_paths(protected), listed_paths(protected)
        ruleset = build_ruleset(support.landlock_abi, read, listed)
        view = plan_file_view(read, listed) if support.view else None
    if not support.seccomp:
        return Prepared(ruleset, None, view=view)
    import pyseccomp as seccomp

    canary = int(seccomp.resolve_syscall(seccomp.system_arch(), "getpgid"))
    return Prepared(ruleset, _compile(_build_seccomp_filter()), canary, view=view)


def plan_file_view(read: Sequence[str], listed: Sequence[str]) -> ViewPlan:
    """The private view of the paths Landlock grants (`view.plan_view`), and the links by which Python names them."""
    import sysconfig

    names = [p for p in sys.path if p and os.path.isabs(p)]
    names += [sysconfig.get_path(name) for name in ("stdlib", "platstdlib")]
    for library in PLAN_LIBRARIES:
        names += list(getattr(sys.modules.get(library), "__path__", []))
    return plan_view(read, listed, SITE_DIRECTORIES, names)


_PR_SET_NO_NEW_PRIVS = 38


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
