"""What this host's kernel offers the exact sandbox, probed once per process: Landlock's ABI, seccomp, whether a
root worker's child can drop to an unprivileged uid, how the cap on threads is enforced, and whether a private file
view can be built (`host_support`, which `edsb sandbox check` prints). Probing changes nothing: what needs a changed
process is tried in a throwaway fork. Also the few libc calls the standard library lacks (capabilities, unshare).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edsb.sandbox.reads import listed_paths, read_paths
from edsb.sandbox.view import probe_view

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
_CLONE_NEWUSER = 0x10000000
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
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
    libc = load_libc()
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, None, 0, 0) == 0:  # pragma: no cover - cannot succeed
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
    effective = capabilities()[0]
    if not effective & (1 << _CAP_SETUID) or not effective & (1 << _CAP_SETGID):
        return False, False, "capabilities dropped only: this root lacks CAP_SETUID/CAP_SETGID"
    if not _id_mapped("/proc/self/uid_map") or not _id_mapped("/proc/self/gid_map"):
        return False, False, f"capabilities dropped only: uid {UNPRIVILEGED_ID} is not mapped in this user namespace"
    readable = [*read_paths(), *listed_paths()]
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
    load_libc()  # loaded here: a fork of a threaded process must not need the dynamic loader's lock
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's exit status is the answer
        os._exit(0 if unshare_user() else 1)
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


@functools.cache
def load_libc() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.restype = ctypes.c_int
    libc.syscall.restype = ctypes.c_long
    return libc


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def capability_buffers() -> tuple[Any, Any]:
    """A capget(2) header and data, for one thread at a time."""
    return _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()


def capabilities(buffers: tuple[Any, Any] | None = None) -> tuple[int, int]:
    """(effective, permitted) capability sets of this thread. `buffers`: made in advance (`prepare`), so that a
    forked child does not create ctypes objects, whose first use there copies about 25 pages of the template."""
    header, data = buffers or capability_buffers()
    if load_libc().capget(ctypes.byref(header), data) != 0:
        return 0, 0
    return (
        data[0].effective | data[1].effective << 32,
        data[0].permitted | data[1].permitted << 32,
    )


def unshare_user() -> bool:
    """unshare(CLONE_NEWUSER) (`os.unshare` is Python 3.12's)."""
    return bool(load_libc().unshare(_CLONE_NEWUSER) == 0)


def drop_capabilities() -> None:
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()  # all zero
    if load_libc().capset(ctypes.byref(header), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot drop capabilities: {os.strerror(err)}")
