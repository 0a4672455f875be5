"""The private file view of a run's child (Linux): a mount namespace whose root is an empty tmpfs holding only what a
contained run may read, each path bound read-only at its own place, as bubblewrap builds a sandbox's root.

Landlock decides what a child may open, but not what it may `stat` or look up: without a view, a child could tell
whether a file outside its reach exists, and read its size, owner and times (a run directory's `results.jsonl` grows
with every verdict). In the view nothing else exists: a path outside it fails with ENOENT, as a missing one does.

The template builds it once (`enter_view`, before it forks), so a run pays nothing; its children share it. A root
template makes a mount namespace directly; any other user makes it inside a user namespace of its own, mapping its
own ids to themselves. The view holds: the standard library's directories whole (their site-packages hidden behind
an empty read-only tmpfs), the other read paths (numpy's directories, the shared libraries), the symbolic links that
the interpreter's path names go through, and `/dev/null`. No /proc, /etc, home, data or run directory, and no /tmp
but the directories that lead to a read path under it (a virtual environment made by `mktemp`), which are the
view's own, empty but for that path, and dated 1970.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 0x400, 0x800, 0x200000
# statvfs flags of a mount, and the mount flag each stands for: a bind mount remounted read-only must keep them (in a
# user namespace the kernel refuses to clear a flag of a mount it inherited)
_KEPT_FLAGS = (
    (os.ST_NOSUID, _MS_NOSUID),
    (os.ST_NODEV, _MS_NODEV),
    (os.ST_NOEXEC, _MS_NOEXEC),
    (os.ST_NOATIME, _MS_NOATIME),
    (os.ST_NODIRATIME, _MS_NODIRATIME),
    (os.ST_RELATIME, _MS_RELATIME),
)
_MNT_DETACH = 2
_STAGING = "/tmp"  # where the new root is mounted before it becomes "/" (private to the namespace)
_HOST = "/.host"  # the host's root, inside the new one while the view takes what it needs from it
DEVICES = ("/dev/null",)  # bound writable: a child's descriptors 0-2 lead there


@dataclass(frozen=True)
class ViewPlan:
    """What a view holds: directories and files bound read-only, directories inside them hidden (a site-packages),
    symbolic links made again (path, target), and devices bound as they are."""

    binds: tuple[str, ...]
    masks: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    devices: tuple[str, ...] = DEVICES
    inner: tuple[str, ...] = ()  # bound read-only inside a mask (numpy's directories in a hidden site-packages)


def plan_view(read: Sequence[str], listed: Sequence[str], masked: Iterable[str], names: Iterable[str]) -> ViewPlan:
    """The view of a run that may read `read` and list `listed` (the standard library's directories, bound whole, with
    `masked` names inside them hidden), and whose interpreter reaches them by the path `names` (sys.path entries,
    which may go through symbolic links)."""
    masks = [os.path.join(root, name) for root in listed for name in masked if os.path.isdir(os.path.join(root, name))]
    binds = list(listed) + [path for path in read if not any(_within(path, root) for root in listed)]
    inner = [path for path in read if any(_within(path, mask) for mask in masks)]
    links: list[tuple[str, str]] = []
    for name in names:
        for link in _links_on(os.path.abspath(name)):
            if link not in links:
                links.append(link)
    return ViewPlan(tuple(binds), tuple(masks), tuple(links), inner=tuple(inner))


def _links_on(path: str) -> list[tuple[str, str]]:
    """The symbolic links met while resolving `path` on the host, as (where, target)."""
    links = []
    pending = [part for part in path.split("/") if part]
    current = "/"
    for _ in range(256):
        if not pending:
            break
        part = pending.pop(0)
        if part in (".", ".."):
            current = os.path.dirname(current) if part == ".." else current
            continue
        candidate = os.path.join(current, part)
        if not os.path.islink(candidate):
            current = candidate
            continue
        target = os.readlink(candidate)
        links.append((candidate, target))
        pending = [p for p in target.split("/") if p] + pending
        current = "/" if target.startswith("/") else current
    return links


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


# --- entering it ---------------------------------------------------------------------------------------------------

_entered = False  # this process, or the template it was forked from, moved into a view
_proc_fd: int | None = None  # /proc as it was before the view (for a child's count of its own threads)


def entered() -> bool:
    """Whether this process is in a view (it or the template it was forked from entered one)."""
    return _entered


def proc_fd() -> int | None:
    """A descriptor of the host's /proc, kept from before the view (None outside one): `contain` counts a child's
    threads through it, then closes it."""
    return _proc_fd


def forget_proc() -> None:
    """Close this process's /proc descriptor (a child's, before model code runs)."""
    global _proc_fd
    if _proc_fd is not None:
        with contextlib.suppress(OSError):
            os.close(_proc_fd)
        _proc_fd = None


def enter_view(plan: ViewPlan) -> None:
    """Move the calling (single-threaded) process into a view built from `plan`; OSError when the kernel refuses."""
    global _entered, _proc_fd
    proc = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _own_namespace()
        _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing done here reaches the host's namespace
        _mount("tmpfs", _STAGING, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755")
        os.mkdir(_STAGING + _HOST, 0o700)
        _pivot_root(_STAGING, _STAGING + _HOST)
        os.chdir("/")
        _fill(plan)
        _umount(_HOST)
        os.rmdir(_HOST)
        _mount(None, "/", None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    except BaseException:
        os.close(proc)
        raise
    _entered, _proc_fd = True, proc


def _own_namespace() -> None:
    """A mount namespace of this process's own: directly as root, else inside a user namespace of its own."""
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        _unshare(_CLONE_NEWNS)
        return
    _unshare(_CLONE_NEWUSER | _CLONE_NEWNS)
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(text)


def _fill(plan: ViewPlan) -> None:
    for path in plan.binds:
        _bind(path, read_only=True)
    for path in plan.devices:
        _bind(path, read_only=False)
    hidden = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    for path in plan.masks:
        _mount("tmpfs", path, "tmpfs", hidden, "mode=0755,size=64k")
    for path in plan.inner:
        _bind(path, read_only=True)
    for path, target in plan.links:
        if not os.path.lexists(path):
            os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
            os.symlink(target, path)
    _untimed(plan)
    for path in plan.masks:
        _mount(None, path, None, _MS_REMOUNT | _MS_RDONLY | hidden)


def _untimed(plan: ViewPlan) -> None:
    """The directories the view made to reach its paths (on its own tmpfs, not the host's) get time 0: a child that
    finds one (a /tmp that leads to a virtual environment) learns only the path that it already has in sys.path."""
    own = {os.lstat("/").st_dev} | {os.lstat(mask).st_dev for mask in plan.masks}
    made = {"/", *plan.masks}
    for path in [*plan.binds, *plan.devices, *plan.inner, *(link for link, _ in plan.links)]:
        parent = os.path.dirname(path)
        while parent not in made and parent != "/":
            made.add(parent)
            parent = os.path.dirname(parent)
    for path in sorted(made, key=len, reverse=True):
        with contextlib.suppress(FileNotFoundError):
            if os.lstat(path).st_dev in own:
                os.utime(path, (0, 0), follow_symlinks=False)


def _bind(path: str, *, read_only: bool) -> None:
    """`path` of the host bound at the same place in the view (a missing one is left out)."""
    source = _HOST + path
    if not os.path.lexists(source):
        return
    os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
    if os.path.isdir(source):
        os.makedirs(path, 0o755, exist_ok=True)
    elif not os.path.lexists(path):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o444))
    _mount(source, path, None, _MS_BIND)
    if read_only:
        kept = os.statvfs(path).f_flag
        flags = sum(flag for st, flag in _KEPT_FLAGS if kept & st)
        _mount(None, path, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV | flags)


# --- the probe -----------------------------------------------------------------------------------------------------


def probe_view() -> tuple[bool, str]:
    """Whether a view can be built here, tried in a throwaway fork (it changes the process), and how."""
    if sys.platform != "linux":
        return False, f"none on {sys.platform}"
    if os.uname().machine not in _SYS_PIVOT_ROOT:
        return False, f"none: pivot_root's number on {os.uname().machine} is not known to edsb"
    _libc()  # loaded here: a fork of a threaded process must not need the dynamic loader's lock
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's exit status is the answer
        try:
            _own_namespace()
            _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
            _mount("tmpfs", _STAGING, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755")
        except OSError as exc:
            os._exit(min(exc.errno or 1, 255))
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        how = "a mount namespace" if os.geteuid() == 0 else "a mount namespace in a user namespace of its own"
        return True, f"only the read paths, read-only ({how})"
    reason = errno.errorcode.get(code, str(code)) if code > 0 else f"signal {-code}"
    return False, f"none: cannot make a mount namespace here ({reason}), so a child can stat paths it cannot read"


# --- ctypes: the calls the standard library lacks -------------------------------------------------------------------


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    libc.syscall.restype = ctypes.c_long
    return libc


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _encoded(value: str | None) -> bytes | None:
    return None if value is None else os.fsencode(value)


def _mount(source: str | None, target: str, kind: str | None, flags: int, data: str | None = None) -> None:
    libc = _libc()
    _check(libc.mount(_encoded(source), os.fsencode(target), _encoded(kind), flags, _encoded(data)), f"mount {target}")


def _umount(target: str) -> None:
    _check(_libc().umount2(os.fsencode(target), _MNT_DETACH), f"umount {target}")


def _unshare(flags: int) -> None:
    _check(_libc().unshare(flags), "unshare")


_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41}


def _pivot_root(new_root: str, put_old: str) -> None:
    number = _SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(errno.ENOSYS, f"pivot_root: unknown on {os.uname().machine}")
    _check(int(_libc().syscall(number, os.fsencode(new_root), os.fsencode(put_old))), "pivot_root")
