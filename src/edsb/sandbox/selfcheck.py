"""A self-test of the kernel boundary (`edsb sandbox check`): attacks run in forked children under `contain()`, each
judged from outside, by what the child reports over a pipe and how it ended. The tests use the same harness."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace

from edsb.sandbox.kernel import MIN_LANDLOCK_ABI, Containment, ContainmentError, contain, host_support, release

DEFAULT_MEMORY_BYTES = 4 << 30  # above this process's own address space, which its children inherit
DEFAULT_CPU_SECONDS = 5
_REPORT_BYTES = 4096


@dataclass(frozen=True)
class Outcome:
    """How one attack ended: "refused" (it met an exception), "done" (it did what it tried), "killed" (a signal
    ended the child), "uncontained" (contain() itself failed: nothing ran) or "timeout"."""

    status: str
    detail: str

    @property
    def refused(self) -> bool:
        return self.status == "refused"


def run_contained(
    attack: Callable[[], object],
    containment: Containment | None = None,
    *,
    timeout: float = 60.0,
    before: Callable[[], None] | None = None,
) -> Outcome:
    """Fork a child, apply `containment` (all layers by default; the pipe is added to keep_fds), run `attack` and
    judge it. `before` runs in the child ahead of contain(), as the pool loads a scene there."""
    base = containment or Containment(memory_bytes=DEFAULT_MEMORY_BYTES, cpu_seconds=DEFAULT_CPU_SECONDS)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        os.close(read_end)
        _child(attack, replace(base, keep_fds=(*base.keep_fds, write_end)), write_end, before)
    os.close(write_end)
    try:
        report, timed_out = _read_report(read_end, pid, timeout)
    finally:
        os.close(read_end)
    _, status = os.waitpid(pid, 0)
    if timed_out:
        return Outcome("timeout", f"still running after {timeout:g} s")
    if os.WIFSIGNALED(status):
        return Outcome("killed", signal.Signals(os.WTERMSIG(status)).name)
    try:
        message = json.loads(report)
        return Outcome(str(message["status"]), str(message["detail"]))
    except (ValueError, KeyError, TypeError):
        return Outcome("done", f"no report (exit status {os.WEXITSTATUS(status)}): {report[:200]!r}")


def _child(
    attack: Callable[[], object], containment: Containment, channel: int, before: Callable[[], None] | None
) -> None:  # pragma: no cover
    code = 0
    try:
        if before is not None:
            before()
        try:
            contain(containment)
        except ContainmentError as exc:
            message = {"status": "uncontained", "detail": str(exc)}
        else:
            try:
                message = {"status": "done", "detail": repr(attack())[:300]}
            except BaseException as exc:
                message = {"status": "refused", "detail": traceback.format_exception_only(exc)[-1].strip()[:300]}
        with contextlib.suppress(OSError):
            os.write(channel, json.dumps(message).encode()[:_REPORT_BYTES])
    except BaseException:
        code = 3
    os._exit(code)


def _read_report(fd: int, pid: int, timeout: float) -> tuple[str, bool]:
    deadline = time.monotonic() + timeout
    data = b""
    while len(data) < _REPORT_BYTES:
        left = deadline - time.monotonic()
        if left <= 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            return data.decode(errors="replace"), True
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, _REPORT_BYTES)
            if not chunk:
                break
            data += chunk
    return data.decode(errors="replace"), False


# --- the attacks of `edsb sandbox check` ------------------------------------------------------------------------------


def libc_syscall(number: int, *args: int) -> int:
    """A raw syscall through ctypes, as model code could make one; OSError when the kernel refuses it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = int(libc.syscall(number, *[ctypes.c_long(a) for a in args]))
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def syscall_number(name: str) -> int:
    """This architecture's number for a syscall."""
    import pyseccomp as seccomp

    return int(seccomp.resolve_syscall(seccomp.system_arch(), name))


_PTRACE_SEIZE = 0x4206


def _tmp_file(pid: int) -> str:
    return f"/tmp/edsb-sandbox-check-{pid}"


def _write_tmp() -> object:
    path = _tmp_file(os.getppid())  # named after the checking process, which removes it if it was made
    with open(path, "x"):
        return path


def _read_passwd() -> object:
    with open("/etc/passwd", "rb") as handle:
        return len(handle.read())


def _read_parent_environ() -> object:
    with open(f"/proc/{os.getppid()}/environ", "rb") as handle:
        return len(handle.read())


def _tcp_socket() -> object:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("127.0.0.1", 9))


def _fork() -> object:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    return pid


def _subprocess() -> object:
    return subprocess.run(["/bin/true"], check=False).returncode


def _signal_parent() -> object:
    os.kill(os.getppid(), 0)  # signal 0: the permission check alone
    return "signalled"


def _ptrace_parent() -> object:
    return libc_syscall(syscall_number("ptrace"), _PTRACE_SEIZE, os.getppid(), 0, 0)


def _io_uring() -> object:
    params = ctypes.create_string_buffer(120)
    return libc_syscall(syscall_number("io_uring_setup"), 8, ctypes.addressof(params))


def _read_edsb() -> object:
    import edsb

    with open(os.path.join(os.path.dirname(edsb.__file__), "llm", "oracle", "answers.py"), "rb") as handle:
        return len(handle.read())


def _out_of_band_byte() -> object:
    """An urgent byte on a socket the child holds, as on its result channel (the parent's poll() would wake)."""
    channel = socket.socket(fileno=int(os.environ["EDSB_CHECK_CHANNEL"]))
    try:
        return channel.send(b"!", socket.MSG_OOB)
    finally:
        channel.detach()


def _thread_flood() -> object:
    import threading

    threading.stack_size(1 << 16)  # small stacks: the count, not the memory limit, must stop it
    hold = threading.Event()
    for count in range(3000):
        try:
            threading.Thread(target=hold.wait, daemon=True).start()
        except RuntimeError as exc:
            raise RuntimeError(f"{exc} after {count} threads") from None
    return "3000 threads"


def _executable_memory() -> object:
    import mmap

    return len(mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC))


def _path_handle() -> object:
    return os.open("/etc/passwd", os.O_PATH)


def _stat_outside() -> object:
    """Look up paths outside the view (the checking process's directory, /tmp, /etc, /proc): each must be missing, or
    be one of the view's own directories that lead to a read path (a /tmp that holds a virtual environment)."""
    paths = [os.environ.get("EDSB_CHECK_CWD", ""), "/tmp", "/etc/passwd", "/proc/self"]
    found = [path for path in paths if path and os.path.lexists(path) and not stand_in(path)]
    if found:
        return f"found {found}"
    raise FileNotFoundError("none of them exists for the run, but as the view's own way to a read path")


def stand_in(path: str) -> bool:
    """Whether `path` is a directory the file view made on its way to a read path: on the view's own root, dated 0."""
    info, root = os.lstat(path), os.lstat("/")
    return stat.S_ISDIR(info.st_mode) and info.st_dev == root.st_dev and info.st_mtime == 0


def _shared_futex() -> object:
    """A futex wake without FUTEX_PRIVATE_FLAG: keyed by a file's page, it would reach another run's waiter."""
    word = ctypes.c_int(0)
    return libc_syscall(syscall_number("futex"), ctypes.addressof(word), 1, 1, 0, 0, 0)


def _host_counts() -> object:
    """sysinfo(2): the host's thread count and free memory, which another run in flight can move at will."""
    host = (ctypes.c_ulong * 32)()  # larger than struct sysinfo
    return libc_syscall(syscall_number("sysinfo"), ctypes.addressof(host))


def _shared_mapping() -> object:
    import mmap

    import numpy

    with open(numpy.__file__, "rb") as handle:
        return len(mmap.mmap(handle.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ))


def _memory_bomb() -> object:
    import numpy as np

    return np.ones(10**10).nbytes


SELF_CHECK: tuple[tuple[str, Callable[[], object]], ...] = (
    ("create a file in /tmp", _write_tmp),
    ("read /etc/passwd", _read_passwd),
    ("read the parent's /proc/<pid>/environ", _read_parent_environ),
    ("open a TCP socket", _tcp_socket),
    ("fork a process", _fork),
    ("run a program (subprocess)", _subprocess),
    ("signal the parent", _signal_parent),
    ("ptrace the parent (libc syscall)", _ptrace_parent),
    ("set up io_uring (libc syscall)", _io_uring),
    ("allocate 80 GB in numpy", _memory_bomb),
    ("read edsb's package (the oracle's answers)", _read_edsb),
    ("send an out-of-band byte on its channel", _out_of_band_byte),
    ("start 3,000 threads", _thread_flood),
    ("map executable anonymous memory", _executable_memory),
    ("open /etc/passwd as an O_PATH handle", _path_handle),
    ("look up its directory, /tmp, /etc, /proc", _stat_outside),
    ("wake a futex shared with other processes", _shared_futex),
    ("map numpy's file shared", _shared_mapping),
    ("read the host's thread count and free memory (sysinfo)", _host_counts),
)


def _honest() -> object:
    """numpy in a pool of 32 threads, all alive at once; a print. (That a pool of 32 fits in a run's default memory
    limit is shown through the pool, whose template is smaller than this process.)"""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    together = threading.Barrier(32, timeout=10)

    def work(i: int) -> float:
        together.wait()
        return float((np.eye(3) @ np.full(3, i)).sum())

    with ThreadPoolExecutor(max_workers=32) as pool:
        total = sum(pool.map(work, range(32)))
    print("honest output goes nowhere")
    return total


@dataclass(frozen=True)
class CheckResult:
    name: str
    outcome: Outcome
    passed: bool


def self_check() -> list[CheckResult]:
    """The attacks (each must be refused) and one honest run (must succeed), with every layer the host has."""
    support = host_support()
    if sys.platform != "linux":
        return [CheckResult("the kernel layers", Outcome("uncontained", f"none on {sys.platform}"), False)]
    containment = Containment(
        memory_bytes=DEFAULT_MEMORY_BYTES,
        cpu_seconds=DEFAULT_CPU_SECONDS,
        landlock=support.landlock_abi is not None and support.landlock_abi >= MIN_LANDLOCK_ABI,
        seccomp=support.seccomp,
    )
    results = []
    ours, theirs = socket.socketpair()  # the channel an attack may write to, kept open in its child
    os.environ["EDSB_CHECK_CHANNEL"] = str(theirs.fileno())
    os.environ["EDSB_CHECK_CWD"] = os.getcwd() if os.getcwd() != "/" else ""
    containment = replace(containment, keep_fds=(theirs.fileno(),))
    try:
        for name, attack in SELF_CHECK:
            if attack is _stat_outside and not support.view:
                continue  # without a view, a lookup is not refused: SECURITY.md says so; the probe's line tells
            outcome = run_contained(attack, containment)
            results.append(CheckResult(name, outcome, outcome.refused))
        honest = run_contained(_honest, containment)
        results.append(CheckResult("honest code runs (numpy in 32 threads, print)", honest, honest.status == "done"))
    finally:
        os.environ.pop("EDSB_CHECK_CHANNEL", None)
        os.environ.pop("EDSB_CHECK_CWD", None)
        ours.close()
        theirs.close()
        release()  # the ruleset's descriptor, closed now rather than by its finaliser at exit
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_tmp_file(os.getpid()))
    return results
