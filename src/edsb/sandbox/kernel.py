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
loads. `contain()` without `prepare()` builds them itself (slower, same result).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import signal
import stat
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edsb.sandbox.view import ViewPlan, enter_view, entered, forget_proc, plan_view, probe_view, proc_fd

# Landlock ABI 3 is the least the boundary needs: ABI 1 confines reads, writes, creation and removal to the rules, but
# before ABI 3 truncation (truncate(2), open with O_TRUNC) is not a handled right, so a file the child may read (a
# library) could be emptied. TCP rules (ABI 4), signal and abstract-socket scopes (ABI 6) and UDP rules (ABI 10) are
# applied when the kernel has them, but are not required: the seccomp allow-list already refuses socket creation and
# every syscall that sends a signal, so they are a second layer, not the only one.
MIN_LANDLOCK_ABI = 3
UNPRIVILEGED_ID = 65534  # "nobody" on most distributions
# Threads (tasks) one run may have, its own main thread included: enough for a thread pool of 32 and numpy (whose
# BLAS runs single-threaded here), far below a flood. The kernel enforces it as RLIMIT_NPROC, which counts the tasks
# of a real uid: a root worker's child takes a real uid of its own (RUN_UID_BASE + its pid: no other process has it),
# and a non-root one a user namespace of its own, in which the count starts at itself.
TASK_LIMIT = 48
RUN_UID_BASE = 1 << 30
PROBE_ENV = "EDSB_SANDBOX_PROBE"  # "no-landlock", "no-seccomp" (comma-separated): make the host look weaker (tests)

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
_CLONE_NEWUSER = 0x10000000
_CLONE_NAMESPACES = 0x7E020000  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
# fcntl: descriptor flags and duplication only; F_SETOWN and F_SETSIG would let SIGIO signal another process
_FCNTL_ALLOWED = (0, 1, 2, 3, 4, 1030)  # F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC
# ioctl: isatty (TCGETS), TIOCGWINSZ, FIONCLEX, FIOCLEX, FIONREAD, and FIONBIO (a socket's timeout or blocking mode)
_IOCTL_ALLOWED = (0x5401, 0x5413, 0x5450, 0x5451, 0x541B, 0x5421)

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_CAP_SETGID, _CAP_SETUID = 6, 7
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


@dataclass(frozen=True)
class HostSupport:
    """What this host's kernel offers, probed once per process: whether `--sandbox exact` can run here, and why not."""

    exact: bool  # every layer `contain` needs is available: the exact sandbox may run here
    reason: str  # one line: what is missing, or what is there
    landlock_abi: int | None  # None: no Landlock (not built in, not in the LSM list, refused by an outer filter)
    seccomp: bool
    user: str  # "root", or "uid N"; whether a root worker can drop to an unprivileged user
    kernel: str = ""  # the kernel release
    landlock_note: str = ""  # why Landlock is missing or too old, or what its ABI adds
    seccomp_note: str = ""
    privilege_drop: str = ""  # what `contain` does about privileges here, and why
    drop_to_uid: bool = False  # a root worker can setuid to UNPRIVILEGED_ID (else it only drops its capabilities)
    drop_in_view: bool = False  # ... inside the file view, whose own directories above the read paths anyone searches
    run_uid: bool = False  # a root worker's child can take a real uid of its own (RUN_UID_BASE + pid is mapped)
    user_namespace: bool = False  # a non-root worker's child can make a user namespace of its own
    task_limit: str = ""  # how TASK_LIMIT is enforced here, or why it is not
    view: bool = False  # a child can get a private file view (a mount namespace holding only its read paths)
    view_note: str = ""  # what the view holds, or why there is none

    def describe(self) -> list[str]:
        """Lines for `edsb sandbox check`."""
        abi = "none" if self.landlock_abi is None else f"ABI {self.landlock_abi}"
        sandbox = "exact (CPython's exec, contained by the kernel)" if self.exact else "restricted (RestrictedPython)"
        return [
            f"sandbox: {sandbox}",
            f"why: {self.reason}",
            f"kernel: Linux {self.kernel}" if self.kernel else f"kernel: {sys.platform}",
            f"Landlock: {abi}" + (f" ({self.landlock_note})" if self.landlock_note else ""),
            f"seccomp: {'usable' if self.seccomp else 'not usable'}"
            + (f" ({self.seccomp_note})" if self.seccomp_note else ""),
            f"user: {self.user}",
            f"privilege drop: {self.privilege_drop}",
            f"threads: {self.task_limit}",
            f"file view: {self.view_note}",
        ]


@functools.cache
def host_support() -> HostSupport:
    """Probe the kernel (cached; safe in any process, it enforces nothing). `exact` needs seccomp filters and Landlock
    ABI 3 (MIN_LANDLOCK_ABI, Linux 6.2): the first that governs truncation; the later network and scope rights are
    used where present, seccomp covering sockets and signals without them. $EDSB_SANDBOX_PROBE=no-landlock or
    no-seccomp reports a feature missing (to simulate a weaker host); no value makes a host look stronger."""
    if sys.platform != "linux":
        return HostSupport(False, f"no Landlock or seccomp on {sys.platform}", None, False, _user(), "", "", "", "")
    weaker = {part.strip() for part in os.environ.get(PROBE_ENV, "").split(",") if part.strip()}
    abi, landlock_note = _probe_landlock()
    if "no-landlock" in weaker:
        abi, landlock_note = None, f"reported missing: {PROBE_ENV}=no-landlock"
    seccomp, seccomp_note = _probe_seccomp()
    if "no-seccomp" in weaker:
        seccomp, seccomp_note = False, f"reported missing: {PROBE_ENV}=no-seccomp"
    view, view_note = probe_view()
    drop_to_uid, drop_in_view, privilege_drop = _probe_privilege_drop(view)
    run_uid, user_namespace, task_limit = _probe_task_limit()
    missing = []
    if abi is None or abi < MIN_LANDLOCK_ABI:
        missing.append(f"Landlock ABI {MIN_LANDLOCK_ABI} or newer")
    if not seccomp:
        missing.append("seccomp filters")
    if missing:
        reason = "this kernel lacks " + " and ".join(missing) + ", so model code runs under RestrictedPython"
    else:
        reason = "Landlock, seccomp and rlimits are all available"
    return HostSupport(
        exact=not missing,
        reason=reason,
        landlock_abi=abi,
        seccomp=seccomp,
        user=_user(),
        kernel=os.uname().release,
        landlock_note=landlock_note,
        seccomp_note=seccomp_note,
        privilege_drop=privilege_drop,
        drop_to_uid=drop_to_uid,
        drop_in_view=drop_in_view,
        run_uid=run_uid,
        user_namespace=user_namespace,
        task_limit=task_limit,
        view=view,
        view_note=view_note,
    )


def _user() -> str:
    uid = os.geteuid() if hasattr(os, "geteuid") else -1
    return "root" if uid == 0 else f"uid {uid}"


def _probe_landlock() -> tuple[int | None, str]:
    """The ABI, or None with the cause (the errno of a version query says which)."""
    try:
        from landlockpy import _syscall as landlock_syscall
        from landlockpy.errors import LandlockError
    except ImportError:
        return None, "the landlockpy package is not installed"
    try:
        abi = landlock_syscall.abi_version()
    except LandlockError as exc:
        if exc.errno == errno.ENOSYS:
            return None, "not built into this kernel (Linux 5.13+), or refused by a container's seccomp profile"
        if exc.errno == errno.EOPNOTSUPP:
            return None, "built in but not enabled at boot: add landlock to the kernel's lsm= list"
        return None, f"refused ({errno.errorcode.get(exc.errno or 0, exc.errno)}), likely by an outer seccomp filter"
    if abi < MIN_LANDLOCK_ABI:
        return abi, f"too old: ABI {MIN_LANDLOCK_ABI} (Linux 6.2) governs truncation"
    extras = [
        name for need, name in ((4, "TCP rules"), (6, "signal and socket scopes"), (10, "UDP rules")) if abi >= need
    ]
    return abi, "files" + "".join(f", {name}" for name in extras)


def _probe_seccomp() -> tuple[bool, str]:
    """Whether filters can be installed: PR_SET_SECCOMP with a NULL program fails with EFAULT when they can."""
    try:
        import pyseccomp  # noqa: F401
    except (ImportError, RuntimeError, OSError):  # RuntimeError: libseccomp itself is missing
        return False, "pyseccomp over libseccomp2 is not installed (apt install libseccomp2)"
    libc = _libc()
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, None, 0, 0) == 0:  # pragma: no cover - cannot succeed
        return False, "the kernel accepted an empty filter"
    err = ctypes.get_errno()
    if err == errno.EFAULT:
        outer = _status_field("Seccomp")
        return True, "inside an outer filter as well" if outer not in ("", "0") else ""
    if err == errno.EINVAL:
        return False, "not built into this kernel (CONFIG_SECCOMP_FILTER)"
    return False, f"refused ({errno.errorcode.get(err, err)})"


def _probe_privilege_drop(view: bool) -> tuple[bool, bool, str]:
    """(a root child can drop to UNPRIVILEGED_ID anywhere, or inside the file view only, what it does): the drop needs
    every read path readable by others, and on the host every directory above them searchable (a Python under
    /root is not), which in the view they are: those directories are the view's own."""
    if os.geteuid() != 0:
        return False, False, f"none needed: the worker runs as uid {os.geteuid()}"
    effective = _capabilities()[0]
    if not effective & (1 << _CAP_SETUID) or not effective & (1 << _CAP_SETGID):
        return False, False, "capabilities dropped only: this root lacks CAP_SETUID/CAP_SETGID"
    if not _id_mapped("/proc/self/uid_map") or not _id_mapped("/proc/self/gid_map"):
        return False, False, f"capabilities dropped only: uid {UNPRIVILEGED_ID} is not mapped in this user namespace"
    readable = [*_read_paths(), *_listed_paths()]
    unreadable = next((path for path in readable if not _readable_by_others(path)), None)
    if unreadable is None:
        return True, True, f"to uid {UNPRIVILEGED_ID}, no groups, no capabilities"
    if view and all(_readable_by_others(path, ancestors=False) for path in readable):
        return False, True, f"to uid {UNPRIVILEGED_ID} in the file view, no groups, no capabilities"
    return False, False, f"capabilities dropped only (uid stays 0): uid {UNPRIVILEGED_ID} cannot read {unreadable}"


def _probe_task_limit() -> tuple[bool, bool, str]:
    """(a root child can take a uid of its own, a non-root child can make a user namespace, what that gives)."""
    cap = f"at most {TASK_LIMIT} per run (RLIMIT_NPROC"
    if os.geteuid() == 0:
        highest = RUN_UID_BASE + _pid_max()
        if _id_mapped("/proc/self/uid_map", RUN_UID_BASE) and _id_mapped("/proc/self/uid_map", highest):
            return True, False, f"{cap} over a real uid of the run's own)"
        return (
            False,
            False,
            f"no cap per run: uids {RUN_UID_BASE}-{highest} are not mapped (a container's pids limit stays)",
        )
    if _can_unshare_user():
        return False, True, f"{cap} in a user namespace of the run's own)"
    return False, False, "no cap per run: user namespaces are not allowed here (a container's pids limit stays)"


def _pid_max() -> int:
    try:
        return int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        return 1 << 22


def _can_unshare_user() -> bool:
    """Whether a child may make a user namespace (tried in a throwaway fork: it changes the process)."""
    _libc()  # loaded here: a fork of a threaded process must not need the dynamic loader's lock
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's exit status is the answer
        os._exit(0 if _unshare_user() else 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _status_field(name: str) -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return line.split(":", 1)[1].strip()
    return ""


def _id_mapped(map_file: str, uid: int = UNPRIVILEGED_ID) -> bool:
    try:
        lines = Path(map_file).read_text().splitlines()
    except OSError:
        return True  # no user namespaces: every id exists
    for line in lines:
        inside, _, count = (int(part) for part in line.split())
        if inside <= uid < inside + count:
            return True
    return False


def _readable_by_others(path: str, *, ancestors: bool = True) -> bool:
    """Whether a user that is neither owner nor in the group can list `path` (with `ancestors`, every directory above
    it searchable too)."""
    current = Path(path)
    try:
        mode = current.stat().st_mode
        if (stat.S_ISDIR(mode) and (mode & 0o005) != 0o005) or (not stat.S_ISDIR(mode) and not mode & 0o004):
            return False
        return not ancestors or all(parent.stat().st_mode & 0o001 for parent in current.parents)
    except OSError:
        return False


# --- ctypes: the few calls the standard library lacks ---------------------------------------------------------------


@functools.cache
def _libc() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.restype = ctypes.c_int
    libc.syscall.restype = ctypes.c_long
    return libc


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _capability_buffers() -> tuple[Any, Any]:
    """A capget(2) header and data, for one thread at a time."""
    return _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()


def _capabilities(buffers: tuple[Any, Any] | None = None) -> tuple[int, int]:
    """(effective, permitted) capability sets of this thread. `buffers`: made in advance (`prepare`), so that a
    forked child does not create ctypes objects, whose first use there copies about 25 pages of the template."""
    header, data = buffers or _capability_buffers()
    if _libc().capget(ctypes.byref(header), data) != 0:
        return 0, 0
    return (
        data[0].effective | data[1].effective << 32,
        data[0].permitted | data[1].permitted << 32,
    )


def _unshare_user() -> bool:
    """unshare(CLONE_NEWUSER) (`os.unshare` is Python 3.12's)."""
    return bool(_libc().unshare(_CLONE_NEWUSER) == 0)


def _drop_capabilities() -> None:
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()  # all zero
    if _libc().capset(ctypes.byref(header), data) != 0:
        raise ContainmentError(f"cannot drop capabilities: {os.strerror(ctypes.get_errno())}")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _prctl(option: int, arg: Any, what: str) -> None:
    if _libc().prctl(option, arg, 0, 0, 0) != 0:
        raise ContainmentError(f"cannot {what}: {os.strerror(ctypes.get_errno())}")


# --- the layers, built -----------------------------------------------------------------------------------------------


def _streams(keep: Iterable[int] = ()) -> list[Any]:
    """Text streams on descriptors 0-2 (those in `keep` replaced by /dev/null); they live as long as the process."""
    return [
        open(fd if fd not in keep else os.devnull, "r+" if fd == 0 else "w", closefd=fd in keep) for fd in (0, 1, 2)
    ]


@dataclass
class _Prepared:
    ruleset: Any  # landlockpy.Ruleset holding its descriptor, or None where Landlock is not used
    seccomp_program: bytes | None  # the compiled BPF program; None where seccomp is not used
    canary_syscall: int = -1  # getpgid: harmless, outside the allow-list, on every architecture
    streams: list[Any] = field(default_factory=_streams)  # sys.stdin/out/err for the child, made once
    fprog: Any = None  # the program as the kernel takes it (struct sock_fprog over a buffer it keeps alive)
    buffer: Any = None
    capabilities: tuple[Any, Any] = field(default_factory=_capability_buffers)  # capget(2)'s, for `contain`
    view: ViewPlan | None = None  # the private file view of the read paths; None where the host cannot build one
    mallopt: Any = field(default_factory=lambda: _libc().mallopt)  # looked up once, not in every child

    def __post_init__(self) -> None:
        if self.seccomp_program is not None:
            self.buffer = ctypes.create_string_buffer(self.seccomp_program, len(self.seccomp_program))
            self.fprog = _SockFprog(len(self.seccomp_program) // 8, ctypes.cast(self.buffer, ctypes.c_void_p))


_prepared: _Prepared | None = None


def _fenced_paths(extra: Iterable[str]) -> tuple[list[str], list[str]]:
    """(directories no read rule may contain, directories no read rule may lie in): secrets, scratch space, the
    benchmark data (`extra`: the pool names every data directory it knows) and edsb itself (its package, and the
    directory that holds it: a site-packages or a checkout)."""
    home = str(Path.home())
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # edsb/
    no_ancestor = ["/", "/proc", "/sys", "/dev", "/tmp", "/var/tmp", "/run", "/etc", "/root", "/home", home]
    no_ancestor += [os.path.dirname(package), os.path.dirname(os.path.dirname(package))]
    no_descendant = ["/proc", "/sys", "/dev", package, *extra]
    no_ancestor += no_descendant
    return [os.path.realpath(p) for p in no_ancestor], [os.path.realpath(p) for p in no_descendant]


# The libraries beyond the standard library that plan code may import: the reference's executor imports numpy. Each is
# granted by its own directories (the package and its bundled shared libraries), never the site-packages that holds
# it, which may hold edsb too.
PLAN_LIBRARIES = ("numpy",)


def _read_paths(protected: Sequence[str] = ()) -> list[str]:
    """What a contained run may read, named exactly: each entry of the standard library (not its site-packages), the
    directories of `PLAN_LIBRARIES`, and the shared libraries the template has loaded (a system library directory
    whole, a directory that also holds Python packages only file by file). Never edsb: the template imported all
    of it that a child needs. A path that would expose a fenced directory (an ancestor of it, or inside /proc, /sys,
    /dev, edsb or the data) is left out."""
    no_ancestor, no_descendant = _fenced_paths(protected)
    candidates = [*_stdlib_entries(), *_library_directories(), *_shared_libraries()]
    chosen: list[str] = []
    for real in candidates:
        if not os.path.exists(real) or real in chosen:
            continue
        if any(_within(f, real) for f in no_ancestor) or any(_within(real, f) for f in no_descendant):
            continue
        chosen.append(real)
    return [path for path in chosen if not any(other != path and _within(path, other) for other in chosen)]


_SITE_DIRECTORIES = ("site-packages", "dist-packages")


def _listed_paths(protected: Sequence[str] = ()) -> list[str]:
    """The standard library's directories, to list only: Python's import system lists a directory on its path again
    whenever its caches are invalidated (`importlib.invalidate_caches`, a changed directory), and a lazy import of
    the standard library would then find nothing. Landlock grants the listing beneath them too: where a
    site-packages lies inside (Docker's, pyenv's, conda's Python), the names of its files, never their contents."""
    import sysconfig

    no_ancestor = [os.path.realpath(p) for p in ("/", "/proc", "/sys", "/dev", "/tmp", "/etc", "/home", *protected)]
    roots = sorted({os.path.realpath(sysconfig.get_path(name)) for name in ("stdlib", "platstdlib")})
    return [root for root in roots if os.path.isdir(root) and not any(_within(f, root) for f in no_ancestor)]


def _stdlib_entries() -> list[str]:
    """Every file and directory of the standard library's directories but the site-packages inside them (a Python
    under /usr/local or pyenv keeps its site-packages, and so perhaps edsb, beneath its standard library)."""
    import sysconfig

    entries = []
    roots = {os.path.realpath(sysconfig.get_path(name)) for name in ("stdlib", "platstdlib")}
    for root in sorted(roots):
        with contextlib.suppress(OSError):
            entries += [os.path.join(root, name) for name in sorted(os.listdir(root)) if name not in _SITE_DIRECTORIES]
    return [os.path.realpath(entry) for entry in entries]


def _library_directories() -> list[str]:
    """Each of `PLAN_LIBRARIES`' package directories, and its wheel's bundled libraries (`numpy.libs`)."""
    directories = []
    for name in PLAN_LIBRARIES:
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None)
        if not isinstance(origin, str):
            continue
        package = os.path.dirname(os.path.realpath(origin))
        directories.append(package)
        parent = os.path.dirname(package)
        with contextlib.suppress(OSError):
            directories += [os.path.join(parent, e) for e in sorted(os.listdir(parent)) if e == f"{name}.libs"]
    return directories


def _shared_libraries() -> list[str]:
    """The shared libraries this process has mapped (the C library, libseccomp, libffi, ...) outside Python's
    trees, for what a lazily imported extension module loads: a directory whole when it holds no Python packages
    (`/usr/lib/x86_64-linux-gnu`), else the files alone (pyenv's and Docker's `lib/` keep `libpython` beside
    `python3.x/site-packages`)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    files = sorted({line.split(None, 5)[5] for line in maps.splitlines() if len(line.split(None, 5)) == 6})
    libraries = [os.path.realpath(f) for f in files if f.startswith("/") and ".so" in os.path.basename(f)]
    python_trees = [os.path.realpath(p) for p in sys.path if p] + [os.path.realpath(sys.prefix)]
    chosen = []
    for library in libraries:
        if any(_within(library, tree) for tree in python_trees):
            continue  # an extension module, loaded already (the standard library's are granted with it)
        directory = os.path.dirname(library)
        holds_python = any(_within(tree, directory) for tree in python_trees)
        chosen.append(library if holds_python or _names_python(directory) else directory)
    return chosen


def _names_python(directory: str) -> bool:
    """Whether a directory holds Python's own trees (`python3.11/`, a site-packages) next to its libraries."""
    try:
        return any(name.startswith("python") or name in _SITE_DIRECTORIES for name in os.listdir(directory))
    except OSError:
        return True


def _within_any(path: str, directories: Iterable[str]) -> bool:
    real = os.path.realpath(path)
    return any(_within(real, directory) for directory in directories)


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _build_ruleset(abi: int, paths: Sequence[str], listed: Sequence[str] = ()) -> Any:
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


def _build(protected: Sequence[str] = ()) -> _Prepared:
    support = host_support()
    ruleset = view = None
    if support.landlock_abi is not None and support.landlock_abi >= MIN_LANDLOCK_ABI:
        read, listed = _read_paths(protected), _listed_paths(protected)
        ruleset = _build_ruleset(support.landlock_abi, read, listed)
        view = _plan_view(read, listed) if support.view else None
    if not support.seccomp:
        return _Prepared(ruleset, None, view=view)
    import pyseccomp as seccomp

    canary = int(seccomp.resolve_syscall(seccomp.system_arch(), "getpgid"))
    return _Prepared(ruleset, _compile(_build_seccomp_filter()), canary, view=view)


def _plan_view(read: Sequence[str], listed: Sequence[str]) -> ViewPlan:
    """The private view of the paths Landlock grants (`view.plan_view`), and the links by which Python names them."""
    import sysconfig

    names = [p for p in sys.path if p and os.path.isabs(p)]
    names += [sysconfig.get_path(name) for name in ("stdlib", "platstdlib")]
    for library in PLAN_LIBRARIES:
        names += list(getattr(sys.modules.get(library), "__path__", []))
    return plan_view(read, listed, _SITE_DIRECTORIES, names)


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
    _prepared = _build(protected)
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
    built = _prepared if _prepared is not None else _build()  # before the drop: the rules open the paths
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


def _enter_view(built: _Prepared) -> None:
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
    streams = _prepared.streams if _prepared is not None and not set(keep) & {0, 1, 2} else _streams(keep)
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
    mallopt = _prepared.mallopt if _prepared is not None else _libc().mallopt
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
    elif own_count and support.user_namespace and not _unshare_user():
        raise ContainmentError(f"cannot make a user namespace: {os.strerror(ctypes.get_errno())}")
    if max_tasks is not None and (support.run_uid or support.user_namespace):
        resource.setrlimit(resource.RLIMIT_NPROC, (max_tasks, max_tasks))
    if any(_capabilities(buffers)):
        _drop_capabilities()
    if any(_capabilities(buffers)) or (to_uid and os.geteuid() != UNPRIVILEGED_ID):
        raise ContainmentError("the privilege drop did not take effect")


def _restrict_landlock(built: _Prepared) -> None:
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


def _load_seccomp(built: _Prepared) -> None:
    if built.fprog is None:
        raise ContainmentError("no seccomp program was built")
    if _libc().prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(built.fprog), 0, 0) != 0:
        raise ContainmentError(f"cannot load the seccomp filter: {os.strerror(ctypes.get_errno())}")
    if _libc().syscall(built.canary_syscall, 0) != -1:  # canary: a syscall outside the allow-list must now fail
        raise ContainmentError("seccomp did not take effect")
