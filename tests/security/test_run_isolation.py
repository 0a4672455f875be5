"""What one run can learn of the host's files and of the other runs, under `--sandbox exact`: nothing.

A run directory answers questions to anyone who can `stat` it (the size of `results.jsonl` grows with each verdict,
so a model guessing the path would learn whether an earlier run passed), and Landlock governs opening, not looking
up. Two runs in flight could also signal each other through a futex keyed by a file they both map (numpy's files),
which no file right governs. Each cheat below goes through the real pool, and a control shows what it would find.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from edsb.runner.run import prepare_out_dir
from edsb.sandbox import CodeContext, CodeError, SandboxLimits, SandboxPool, kernel, reads
from edsb.sandbox.kernel import Containment, host_support
from edsb.sandbox.selfcheck import run_contained
from tests.support.kernel_sandbox import require_kernel_sandbox

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the kernel sandbox is Linux's")
FULL = Containment(memory_bytes=4 << 30, cpu_seconds=30)

STAT = """def parse_event():
    import json, os
    seen = {}
    for path in PATHS:
        try:
            info = os.stat(path)
            seen[path] = ['found', info.st_size, info.st_mtime]
        except OSError as exc:
            seen[path] = [type(exc).__name__, exc.errno]
    print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def isolation_pool() -> Iterator[SandboxPool]:
    require_kernel_sandbox()
    with SandboxPool(SandboxLimits(sandbox="exact", timeout=10.0, workers=2)) as pool:
        yield pool


def _outside_the_read_paths(directory: Path) -> list[str]:
    """Entries of a directory that exist on the host and hold none of the paths a run may read."""
    read = reads.read_paths()
    entries = [directory, *sorted(directory.iterdir())] if directory.is_dir() else []
    return [str(e) for e in entries if not any(reads.within(path, str(e.resolve())) for path in read)][:8]


def test_a_cheat_that_stats_the_run_directory_home_and_tmp_learns_nothing(
    isolation_pool: SandboxPool, house: CodeContext, tmp_path: Path
) -> None:
    """Every path answers as a missing one does (FileNotFoundError, ENOENT), whether it exists or not; a directory on
    the way to a read path (a /tmp that holds the virtual environment) is the view's own, dated 0."""
    if not host_support().view:
        pytest.skip(f"no private file view here: {host_support().view_note}")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "results.jsonl").write_text('{"passed": true}\n')
    (run_dir / "config.json").write_text("{}")
    (run_dir / "transcripts").mkdir()
    (run_dir / "transcripts" / "requests.jsonl").write_text("{}\n")
    paths = [str(run_dir / name) for name in ("results.jsonl", "config.json", "transcripts/requests.jsonl")]
    paths += [str(run_dir), str(tmp_path), "/tmp", str(Path.home())]
    paths += [*_outside_the_read_paths(Path.home()), "/etc/passwd", "/proc/self", "/root/.bashrc", "/srv"]
    existing = [path for path in paths if os.path.lexists(path)]
    assert len(existing) >= 8, existing  # the control: the cheat asks about files that are there
    missing = str(tmp_path / "no-such-file")
    seen = json.loads(isolation_pool.execute(STAT.replace("PATHS", repr([*existing, missing])), house).output)
    assert seen[missing] == ["FileNotFoundError", 2]
    on_the_way = {path for path in existing if any(reads.within(read, path) for read in reads.read_paths())}
    assert all(seen[path][0] == "found" and seen[path][2] == 0 for path in on_the_way), seen
    hidden = [path for path in existing if path not in on_the_way]
    assert {path: seen[path] for path in hidden} == {path: seen[missing] for path in hidden}


# A shared futex (no FUTEX_PRIVATE_FLAG) on numpy's first page, mapped privately: the kernel keys it by the file and
# offset, so a wait in one run would be woken by a wake in another. The waiter waits up to 8 s; the waker tries until
# it wakes someone, or 400 times.
FUTEX = """def parse_event():
    import ctypes, mmap, os, time
    import numpy
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    with open(numpy.__file__, 'rb') as handle:
        page = mmap.mmap(handle.fileno(), 4096, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
    view = numpy.frombuffer(page, dtype=numpy.int32, count=1)
    word, where = int(view[0]), view.__array_interface__['data'][0]
    ROLE
"""
WAIT = """timeout = (ctypes.c_long * 2)(8, 0)
    result = libc.syscall(202, ctypes.c_void_p(where), 0, word, timeout, 0, 0)
    print('woken' if result == 0 else os.strerror(ctypes.get_errno()))"""
WAKE = """for _ in range(400):
        result = libc.syscall(202, ctypes.c_void_p(where), 1, 1, 0, 0, 0)
        if result != 0:
            break
        time.sleep(0.02)
    print(result if result >= 0 else os.strerror(ctypes.get_errno()))"""
PRIVATE_WAKE = """print(libc.syscall(202, ctypes.c_void_p(where), 1 | 128, 1, 0, 0, 0))"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the futex syscall's number is x86_64's here")
def test_two_runs_in_flight_cannot_wake_each_other(isolation_pool: SandboxPool, house: CodeContext) -> None:
    isolation_pool.warm_up()
    answers: dict[str, str] = {}

    def waiter() -> None:
        answers["wait"] = isolation_pool.execute(FUTEX.replace("ROLE", WAIT), house).output.strip()

    thread = threading.Thread(target=waiter)
    thread.start()
    answers["wake"] = isolation_pool.execute(FUTEX.replace("ROLE", WAKE), house).output.strip()
    thread.join(30)
    assert answers == {"wait": "Operation not permitted", "wake": "Operation not permitted"}
    # a futex of the run's own still works: no one waits, no one is woken
    assert isolation_pool.execute(FUTEX.replace("ROLE", PRIVATE_WAKE), house).output.strip() == "0"


MEMMAP = """def parse_event():
    import numpy as np
    print(np.memmap(np.__file__, dtype=np.uint8, mode='r', shape=(16,))[:4])
"""
HONEST = """def parse_event():
    import numpy as np
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(4) as pool:
        total = sum(pool.map(lambda i: float(np.linalg.inv(np.eye(3) * (i + 1)).trace()), range(8)))
    print(round(total, 6))
"""


def test_a_shared_mapping_is_refused_and_honest_numpy_runs(isolation_pool: SandboxPool, house: CodeContext) -> None:
    with pytest.raises(CodeError) as caught:
        isolation_pool.execute(MEMMAP, house)
    assert caught.value.message.startswith("PermissionError"), caught.value.message
    assert isolation_pool.execute(HONEST, house).output.strip() == str(round(sum(3 / (i + 1) for i in range(8)), 6))


@pytest.mark.skipif(os.geteuid() != 0, reason="the drop to uid 65534 is a root worker's")
def test_without_a_file_view_the_unprivileged_child_cannot_look_into_the_run_directory() -> None:
    """Where the host has no file view (a root worker without CAP_SYS_ADMIN, as under Docker's default profile), a
    root worker's child drops to uid 65534 instead, and Landlock does not govern `stat`: the run directory edsb
    makes is then out of its reach only because others may not search it."""
    require_kernel_sandbox()
    kernel.prepare()
    dropped = replace(host_support(), drop_to_uid=True)

    def force_the_uid_drop() -> None:
        kernel.host_support = lambda: dropped  # type: ignore[assignment]

    base = Path(tempfile.mkdtemp())
    try:
        base.chmod(0o755)  # a place anyone may search, as a checkout or a home often is
        run_dir = base / "runs" / "model-261206-120000-abc123"
        prepare_out_dir(run_dir)
        (run_dir / "results.jsonl").write_text('{"passed": true}\n')
        results = str(run_dir / "results.jsonl")
        no_view = replace(FULL, view=False)
        looked = run_contained(lambda: os.stat(results).st_size, no_view, before=force_the_uid_drop)
        assert looked.status == "refused" and looked.detail.startswith("PermissionError"), looked
        run_dir.chmod(0o755)  # the control: a directory others may search answers
        looked = run_contained(lambda: os.stat(results).st_size, no_view, before=force_the_uid_drop)
        assert looked.status == "done" and looked.detail == str(len('{"passed": true}\n')), looked
    finally:
        shutil.rmtree(base)


# sysinfo(2) reports the whole host, not the run: the number of threads (`procs`) and the free memory. A run that
# starts 40 threads and fills 400 MiB moves both far beyond their noise, and a run beside it reads that as a bit.
SYSINFO = """def parse_event():
    import ctypes, os, time
    libc = ctypes.CDLL(None, use_errno=True)
    host = (ctypes.c_ulong * 32)()  # struct sysinfo is smaller
    counts = []
    for _ in range(150):
        if libc.sysinfo(host) != 0:
            print(os.strerror(ctypes.get_errno()))
            return
        counts.append(ctypes.c_ushort.from_buffer(host, 10 * 8).value)  # procs, after 10 longs
        time.sleep(0.01)
    print(max(counts) - min(counts))
"""
TALK = """def parse_event():
    import threading, time
    import numpy as np
    hold = threading.Event()
    for _ in range(40):
        threading.Thread(target=hold.wait, daemon=True).start()
    block = np.ones(400 << 17)
    time.sleep(1.5)
    hold.set()
"""


def test_a_run_cannot_read_the_hosts_thread_count_or_free_memory(
    isolation_pool: SandboxPool, house: CodeContext
) -> None:
    """The listener samples sysinfo while the other run talks; it must be refused, not see the change."""
    isolation_pool.warm_up()
    answers: dict[str, str] = {}

    def listener() -> None:
        answers["listen"] = isolation_pool.execute(SYSINFO, house).output.strip()

    thread = threading.Thread(target=listener)
    thread.start()
    isolation_pool.execute(TALK, house)
    thread.join(30)
    assert answers == {"listen": "Operation not permitted"}
