"""The kernel layers, proven from outside: a forked child applies `contain()`, attempts an attack and reports over a
pipe; the parent judges. Every attack is refused with all layers on, and succeeds with only the layers responsible
for it switched off (so each test can fail). The allow matrix shows that honest plan code still runs."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from edsb.sandbox import kernel
from edsb.sandbox.kernel import Containment
from edsb.sandbox.selfcheck import Outcome, libc_syscall, syscall_number
from edsb.sandbox.selfcheck import run_contained as _run_contained
from tests.support.kernel_sandbox import require_kernel_sandbox

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the kernel sandbox is Linux's")


def _address_space() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


HEADROOM = 512 << 20
# The memory limit of FULL stands for "the pytest process's address space at the fork, and room for honest work":
# the process grows over a whole suite (models loaded, threads' stacks), and a limit measured when this module was
# collected could leave a later child none at all (a thread or the shell of os.system then fails to start).
MEMORY_AT_FORK = 0
FULL = Containment(memory_bytes=MEMORY_AT_FORK, cpu_seconds=30)


def run_contained(attack: Callable[[], object], containment: Containment, **options: Any) -> Outcome:
    if containment.memory_bytes == MEMORY_AT_FORK:
        containment = replace(containment, memory_bytes=_address_space() + HEADROOM)
    return _run_contained(attack, containment, **options)


@pytest.fixture(scope="module", autouse=True)
def prepared() -> None:
    require_kernel_sandbox()
    kernel.prepare()


def without(*layers: str) -> Containment:
    return replace(FULL, **dict.fromkeys(layers, False))


# --- the targets the attacks aim at -------------------------------------------------------------------------------


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_text("precious")
    return path


@pytest.fixture
def sleeper() -> Iterator[int]:
    """A sibling process, as another run's worker is."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the sibling
        time.sleep(60)
        os._exit(0)
    yield pid
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


@pytest.fixture
def tcp_listener() -> Iterator[tuple[str, int]]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()


@pytest.fixture
def tcp6_listener() -> Iterator[tuple[str, int]]:
    try:
        server = socket.create_server(("::1", 0), family=socket.AF_INET6)
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    with server:
        yield server.getsockname()[:2]


@pytest.fixture
def unix_listener(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "listener.sock")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        server.listen()
        yield path


# --- the deny matrix ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attack:
    name: str
    attack: Callable[..., object]  # called with the fixture values named in `needs`
    layers: tuple[str, ...]  # the layers that refuse it: with only these off, it succeeds
    needs: tuple[str, ...] = ()


CREATED = "edsb-kernel-test-created-"


def _create(directory: Path) -> object:
    path = directory / f"{CREATED}{os.getpid()}"
    with open(path, "x"):
        pass
    return str(path)


def _read(path: str | Path) -> object:
    with open(path, "rb") as handle:
        return len(handle.read(64))


def _system() -> object:
    status = os.system("exit 7")
    if status != 7 << 8:
        raise OSError(f"the shell did not run (status {status})")
    return status


def _fork_bomb() -> object:
    children = []
    for _ in range(20):  # bounded, so that the control (the layer off) cannot hurt the host
        pid = os.fork()
        if pid == 0:  # pragma: no cover
            time.sleep(0.2)
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
    return len(children)


def _connect(family: socket.AddressFamily, address: object, kind: socket.SocketKind = socket.SOCK_STREAM) -> object:
    with socket.socket(family, kind) as sock:
        if kind == socket.SOCK_DGRAM:
            return sock.sendto(b"x", address)
        sock.connect(address)
        return "connected"


def _kill(pid: int) -> object:
    os.kill(pid, signal.SIGKILL)
    return "killed"


def _ptrace(pid: int) -> object:
    return libc_syscall(syscall_number("ptrace"), 0x4206, pid, 0, 0)  # PTRACE_SEIZE: attaches without stopping


def _io_uring() -> object:
    params = ctypes.create_string_buffer(120)
    return libc_syscall(syscall_number("io_uring_setup"), 8, ctypes.addressof(params))


def _execve() -> object:
    libc = ctypes.CDLL(None, use_errno=True)
    argv = (ctypes.c_char_p * 4)(b"sh", b"-c", b"exit 7", None)
    libc.execv(b"/bin/sh", argv)
    err = ctypes.get_errno()
    raise OSError(err, os.strerror(err))


def _execve_syscall() -> object:
    path = ctypes.create_string_buffer(b"/bin/sh")
    argv = (ctypes.c_char_p * 4)(b"sh", b"-c", b"exit 7", None)
    return libc_syscall(syscall_number("execve"), ctypes.addressof(path), ctypes.addressof(argv), 0)


def _memory(megabytes: int) -> object:
    import numpy as np

    return int(np.ones(megabytes << 17).sum())  # 8-byte floats: megabytes << 20 bytes


DATA_DIR = Path(os.environ.get("EDSB_DATA") or Path(__file__).parent)

ATTACKS = [
    Attack(
        "create a file in tmp_path",
        lambda tmp_path: _create(tmp_path),
        ("view", "landlock", "drop_privileges"),
        ("tmp_path",),
    ),
    Attack("create a file in /tmp", lambda: _create(Path("/tmp")), ("view", "landlock", "drop_privileges")),
    Attack(
        "truncate (open 'w')",
        lambda victim: open(victim, "w").close(),
        ("view", "landlock", "drop_privileges"),
        ("victim",),
    ),
    Attack(
        "truncate(2)",
        lambda victim: os.truncate(victim, 0),
        ("view", "landlock", "seccomp", "drop_privileges"),
        ("victim",),
    ),
    Attack(
        "delete a file",
        lambda victim: os.unlink(victim),
        ("view", "landlock", "seccomp", "drop_privileges"),
        ("victim",),
    ),
    Attack(
        "read /proc/<ppid>/environ",
        lambda: _read(f"/proc/{os.getppid()}/environ"),
        ("view", "landlock", "drop_privileges"),
    ),
    Attack(
        "open /proc/<ppid>/mem",
        lambda: os.open(f"/proc/{os.getppid()}/mem", os.O_RDONLY),
        ("view", "landlock", "drop_privileges"),
    ),
    Attack(
        "read ~/.netrc",
        lambda netrc: _read(os.path.expanduser("~/.netrc")),
        ("view", "landlock", "drop_privileges"),
        ("netrc",),
    ),
    Attack("list the data directory", lambda: len(os.listdir(DATA_DIR)), ("view", "landlock")),
    Attack("read an inherited descriptor", lambda secret_fd: os.read(secret_fd, 8), ("close_fds",), ("secret_fd",)),
    Attack(
        "TCP connect",
        lambda tcp_listener: _connect(socket.AF_INET, tcp_listener),
        ("seccomp", "landlock"),
        ("tcp_listener",),
    ),
    Attack(
        "TCP over IPv6",
        lambda tcp6_listener: _connect(socket.AF_INET6, tcp6_listener),
        ("seccomp", "landlock"),
        ("tcp6_listener",),
    ),
    Attack("UDP send", lambda: _connect(socket.AF_INET, ("127.0.0.1", 9), socket.SOCK_DGRAM), ("seccomp", "landlock")),
    Attack(
        "AF_UNIX connect",
        lambda unix_listener: _connect(socket.AF_UNIX, unix_listener),
        ("view", "seccomp", "landlock", "drop_privileges"),
        ("unix_listener",),
    ),
    Attack("os.fork", lambda: os.fork() or os.wait(), ("seccomp",)),
    Attack("os.system", _system, ("view", "seccomp", "landlock")),
    Attack(
        "subprocess",
        lambda: subprocess.run(["/bin/sh", "-c", "exit 7"], check=False).returncode,
        ("view", "seccomp", "landlock"),
    ),
    Attack("a fork bomb", _fork_bomb, ("seccomp",)),
    Attack("signal the parent", lambda: os.kill(os.getppid(), 0), ("seccomp", "landlock", "drop_privileges")),
    Attack("kill a sibling", lambda sleeper: _kill(sleeper), ("seccomp", "landlock", "drop_privileges"), ("sleeper",)),
    Attack(
        "ptrace a sibling (libc syscall)",
        lambda sleeper: _ptrace(sleeper),
        ("seccomp", "landlock", "drop_privileges"),
        ("sleeper",),
    ),
    Attack("io_uring_setup (libc syscall)", _io_uring, ("seccomp",)),
    Attack("F_SETOWN (SIGIO towards the parent)", lambda: fcntl.fcntl(0, fcntl.F_SETOWN, os.getppid()), ("seccomp",)),
    Attack("execve (libc)", _execve, ("view", "seccomp", "landlock")),
    Attack("execve (libc syscall)", _execve_syscall, ("view", "seccomp", "landlock")),
    Attack("allocate past the memory limit", lambda: _memory(2 * HEADROOM >> 20), ("rlimits",)),
]


@pytest.fixture
def netrc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text("machine api.example.com password secret\n")
    monkeypatch.setenv("HOME", str(home))


@pytest.fixture
def secret_fd(tmp_path: Path) -> Iterator[int]:
    path = tmp_path / "secret"
    path.write_text("the key")
    fd = os.open(path, os.O_RDONLY)
    yield fd
    os.close(fd)


def _arguments(attack: Attack, request: pytest.FixtureRequest) -> dict[str, object]:
    return {name: request.getfixturevalue(name) for name in attack.needs}


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_refused_with_every_layer(attack: Attack, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    arguments = _arguments(attack, request)
    outcome = run_contained(lambda: attack.attack(**arguments), FULL)
    assert outcome.status == "refused", outcome
    refusals = ("PermissionError", "FileNotFoundError", "OSError", "MemoryError")  # FileNotFound: the file view's
    assert outcome.detail.split(":")[0].endswith(refusals), outcome
    _assert_untouched(attack, arguments, tmp_path)


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_succeeds_with_its_layers_off(attack: Attack, request: pytest.FixtureRequest) -> None:
    """The control: the same attack, with only the layers that should refuse it switched off, gets through."""
    arguments = _arguments(attack, request)
    try:
        outcome = run_contained(lambda: attack.attack(**arguments), without(*attack.layers))
    finally:
        for path in Path("/tmp").glob(CREATED + "*"):
            path.unlink()
    if attack.name.startswith("execve"):  # the child became the shell, which exited 7 without a report
        assert outcome == Outcome("done", "no report (exit status 7): ''"), outcome
    else:
        assert outcome.status == "done", outcome
    if "sleeper" in arguments and attack.name.startswith("kill"):
        _, status = os.waitpid(int(arguments["sleeper"]), 0)  # type: ignore[call-overload]
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def _assert_untouched(attack: Attack, arguments: dict[str, object], tmp_path: Path) -> None:
    if "victim" in arguments:
        assert Path(str(arguments["victim"])).read_text() == "precious"
    assert not list(tmp_path.glob(CREATED + "*"))
    assert not list(Path("/tmp").glob(CREATED + "*"))
    if "sleeper" in arguments:
        assert os.waitpid(int(arguments["sleeper"]), os.WNOHANG) == (0, 0)  # type: ignore[call-overload]


def test_a_numpy_memory_bomb_is_a_memory_error() -> None:
    outcome = run_contained(lambda: _memory(80_000), FULL)  # np.ones of 10**10 floats
    assert outcome.status == "refused" and "MemoryError" in outcome.detail, outcome


def _burn_cpu(seconds: float) -> object:
    """Spin until the process has used `seconds` of CPU as RLIMIT_CPU counts it (user and system time), reading the
    clock between stretches of pure computation so that the syscalls themselves cost little."""
    signal.signal(signal.SIGXCPU, signal.SIG_IGN)
    while time.process_time() < seconds:
        for _ in range(100_000):
            pass
    return "ran past the hard limit"


def test_a_cpu_loop_that_ignores_sigxcpu_is_killed_at_the_hard_limit() -> None:
    limited = replace(FULL, cpu_seconds=1)
    past_hard_limit = 1 + kernel.CPU_GRACE_SECONDS + 0.5
    assert run_contained(lambda: _burn_cpu(past_hard_limit), limited, timeout=120) == Outcome("killed", "SIGKILL")
    control = run_contained(lambda: _burn_cpu(past_hard_limit), replace(limited, rlimits=False), timeout=120)
    assert control == Outcome("done", repr("ran past the hard limit"))


def _flood() -> object:
    block = b"x" * 65536
    for _ in range(16):
        os.write(1, block)
        os.write(2, block)
    return "flooded"


@pytest.mark.parametrize("close_fds", [True, False], ids=["contained", "control"])
def test_a_flood_on_stdout_and_stderr_goes_nowhere(close_fds: bool) -> None:
    pipes = [os.pipe(), os.pipe()]
    received = [0, 0]

    def drain(index: int) -> None:
        while chunk := os.read(pipes[index][0], 65536):
            received[index] += len(chunk)

    readers = [threading.Thread(target=drain, args=(i,)) for i in (0, 1)]
    for reader in readers:
        reader.start()

    def redirect() -> None:  # in the child, before contain(): its 1 and 2 lead to the parent's pipes
        for target, (read_end, write_end) in zip((1, 2), pipes, strict=True):
            os.dup2(write_end, target)
            os.close(read_end)

    try:
        outcome = run_contained(_flood, replace(FULL, close_fds=close_fds), before=redirect)
    finally:
        for _, write_end in pipes:
            os.close(write_end)
        for reader in readers:
            reader.join()
        for read_end, _ in pipes:
            os.close(read_end)
    assert outcome.status == "done", outcome
    if close_fds:
        assert received == [0, 0]
    else:
        assert min(received) >= 16 * 65536


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x32 syscall numbers exist on x86_64 only")
def test_a_syscall_of_another_abi_kills_the_process() -> None:
    x32_getpid = 0x40000000 | 39
    assert run_contained(lambda: libc_syscall(x32_getpid), FULL) == Outcome("killed", "SIGSYS")
    assert run_contained(lambda: libc_syscall(x32_getpid), without("seccomp")).status != "killed"


# --- the allow matrix -----------------------------------------------------------------------------------------------

LAZY_MODULES = (
    "random", "copy", "logging", "dataclasses", "collections", "json", "math", "itertools", "types", "statistics",
    "fractions", "decimal", "heapq", "bisect",
)  # fmt: skip


def _lazy_imports() -> object:
    """Import the modules afresh from disk (forgotten first, as they would be in a template that never loaded them)."""
    import importlib

    for name in list(sys.modules):
        if name.split(".")[0] in LAZY_MODULES and name not in sys.builtin_module_names:
            del sys.modules[name]
    loaded = [importlib.import_module(name) for name in LAZY_MODULES]
    random = sys.modules["random"]
    random.seed(1)
    assert sys.modules["json"].loads("[1]") == [1]
    return len(loaded)


def _numpy() -> object:
    import numpy as np

    a = np.arange(9.0).reshape(3, 3) + np.eye(3)
    inverse = np.linalg.inv(a @ a.T)
    np.linalg.svd(a)
    return round(float(np.linalg.norm(inverse)), 6) > 0 and str(np.array([1.5, 2]))


def _thread() -> object:
    results: list[int] = []
    worker = threading.Thread(target=lambda: results.append(sum(range(100))))
    worker.start()
    worker.join()
    return results[0]


def _print_and_time() -> object:
    import datetime

    print("a plan", flush=True)
    sys.stderr.write("a warning\n")
    time.sleep(0.001)
    return time.time() > 0 and time.monotonic() > 0 and datetime.datetime.now().year > 2000


HONEST = {"lazy imports": _lazy_imports, "numpy": _numpy, "a thread": _thread, "print and time": _print_and_time}


@pytest.mark.parametrize("name", HONEST)
def test_honest_code_runs(name: str) -> None:
    outcome = run_contained(HONEST[name], FULL)
    assert outcome.status == "done" and outcome.detail not in ("False", "None"), outcome


def test_the_kept_channel_works_as_a_socket() -> None:
    """The result channel stays usable after contain(): blocking mode, timeouts, send and receive."""
    ours, theirs = socket.socketpair()
    with ours, theirs:

        def answer() -> object:
            channel = socket.socket(fileno=os.dup(theirs.fileno()))
            channel.settimeout(30)
            request = channel.recv(16)
            channel.sendall(request.upper())
            return request

        ours.sendall(b"plan")
        outcome = run_contained(answer, replace(FULL, keep_fds=(theirs.fileno(),)))
        assert outcome == Outcome("done", repr(b"plan")), outcome
        assert ours.recv(16) == b"PLAN"


def test_contain_without_prepare_gives_the_same_boundary() -> None:
    def fresh() -> None:
        kernel._prepared = None  # in the child only: contain() builds the layers itself

    assert run_contained(_numpy, FULL, before=fresh).status == "done"
    assert run_contained(lambda: _create(Path("/tmp")), FULL, before=fresh).status == "refused"
    assert run_contained(lambda: os.fork() or os.wait(), FULL, before=fresh).status == "refused"
