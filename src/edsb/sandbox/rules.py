"""The rules a run's child loads, built once in the template: the Landlock ruleset over the read paths, the private
file view's plan of them, and the compiled seccomp program (a default-deny allow-list, with argument checks on the
calls that could reach beyond the run: clone, ioctl, fcntl, open, mmap, mprotect, futex, send, prlimit).
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from edsb.sandbox.host import MIN_LANDLOCK_ABI, capability_buffers, host_support, load_libc
from edsb.sandbox.reads import PLAN_LIBRARIES, SITE_DIRECTORIES, listed_paths, read_paths
from edsb.sandbox.view import ViewPlan, plan_view

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
    # facts about itself (never `sysinfo`: the host's thread count and free memory, which a run beside it can move)
    "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups", "uname",
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
