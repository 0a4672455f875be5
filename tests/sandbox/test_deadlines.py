"""The parent's deadlines are the parent's: whatever a child sends (an out-of-band byte, part of a frame, a frame a
byte at a time, nothing), a read from it ends by its deadline, and a run still going at its wall-clock limit is the
model's `code_timeout`, its slot free at once for the next run."""

from __future__ import annotations

import socket
import sys
import threading
import time

import pytest

from edsb.sandbox import CodeContext, CodeError, SandboxLimits, SandboxPool
from edsb.sandbox.wire import HEADER, Deadline, FrameReader
from tests.support.kernel_sandbox import require_kernel_sandbox

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the kernel sandbox is Linux's")

# Generous: the runs below last their limit of 2 s; the attacks would hold the parent for 60 s.
BOUND = 20.0


def stalled_read(send: list[bytes], oob: bool) -> float:
    """Seconds a read with a 0.5 s deadline takes while the other end sends `send` (and maybe one urgent byte),
    then nothing; the read must end with Deadline."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        if oob:
            theirs.send(b"!", socket.MSG_OOB)
        for part in send:
            theirs.send(part)
        start = time.monotonic()
        with pytest.raises(Deadline):
            FrameReader(ours).read(start + 0.5, 1 << 20)
        return time.monotonic() - start


@pytest.mark.parametrize(
    "send",
    [[], [HEADER.pack(10)], [HEADER.pack(10) + b'{"st'], [b"\x00\x00"]],
    ids=["nothing", "header", "partial", "half a header"],
)
@pytest.mark.parametrize("oob", [False, True], ids=["in band", "out of band"])
def test_a_read_ends_by_its_deadline_whatever_arrives(send: list[bytes], oob: bool) -> None:
    assert stalled_read(send, oob) < BOUND


def test_an_out_of_band_byte_does_not_spin_the_reader() -> None:
    """The urgent byte is dropped and the reader waits in poll again: little CPU over a 0.5 s wait."""
    before = time.process_time()
    stalled_read([], oob=True)
    assert time.process_time() - before < 0.25


def test_an_answer_behind_an_out_of_band_byte_is_read() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.send(b"!", socket.MSG_OOB)
        theirs.send(HEADER.pack(2) + b"{}")
        assert FrameReader(ours).read(time.monotonic() + 5, 1 << 20) == {}


def exact_limits() -> SandboxLimits:
    require_kernel_sandbox()
    return SandboxLimits(sandbox="exact", timeout=2.0, workers=1)


# Model code that finds its channel, tries to send an urgent byte, then a header and part of a frame, then sleeps.
STALL = """def parse_event():
    import socket, time
    for fd in range(3, 64):
        try:
            channel = socket.socket(fileno=fd)
        except OSError:
            continue
        try:
            channel.send(b'!', socket.MSG_OOB)
            print('urgent byte sent')
        except OSError as exc:
            print(type(exc).__name__)
        channel.send(b'\\x00\\x00\\x01\\x00{"status"')
        channel.detach()
    time.sleep(60)
"""


def test_a_stalling_child_is_the_models_timeout_and_frees_its_slot(benchmark: object) -> None:
    context = CodeContext.for_benchmark(benchmark.root, "House")  # type: ignore[attr-defined]
    with SandboxPool(exact_limits()) as pool:
        pool.warm_up()
        start = time.monotonic()
        with pytest.raises(CodeError) as caught:
            pool.execute(STALL, context)
        assert caught.value.kind == "code_timeout" and time.monotonic() - start < BOUND
        done = threading.Event()
        answer: list[str] = []

        def honest() -> None:
            plan = pool.execute("def parse_event():\n    get_character('A').set_target_action('idle')\n", context)
            answer.append(str(plan.characters[0].target_action))
            done.set()

        threading.Thread(target=honest, daemon=True).start()
        assert done.wait(BOUND) and answer == ["idle"]


URGENT = """def parse_event():
    import socket
    for fd in range(3, 64):
        try:
            channel = socket.socket(fileno=fd)
        except OSError:
            continue
        for flags in (socket.MSG_OOB, socket.MSG_OOB | socket.MSG_DONTWAIT):
            try:
                channel.send(b'!', flags)
                print('sent')
            except OSError as exc:
                print(type(exc).__name__)
        channel.detach()
    get_character('A').set_target_action('done')
"""


def test_seccomp_refuses_out_of_band_data_on_the_channel(benchmark: object) -> None:
    context = CodeContext.for_benchmark(benchmark.root, "House")  # type: ignore[attr-defined]
    with SandboxPool(exact_limits()) as pool:
        plan = pool.execute(URGENT, context)
    assert plan.output == "PermissionError\nPermissionError\n" and plan.characters[0].target_action == "done"
