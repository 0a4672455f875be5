"""Ctrl-C twice on a terminal (a real pseudo-terminal, so edsb draws its live progress bar): the bar is closed
before the last line, so "stopped: ..." is the last thing printed, below the bar, the cursor is shown again, and
the shell's prompt starts on a line of its own."""

from __future__ import annotations

import fcntl
import os
import struct
import termios
import threading
from pathlib import Path

from tests.support.edsb_cli import child_env, ctrl_c_twice, scripted_run_args, start_edsb
from tests.support.openai_server import OpenAIServer, Reply

SHOW_CURSOR, HIDE_CURSOR = "\x1b[?25h", "\x1b[?25l"


class _Screen:
    """Everything the child writes to its terminal, read off the pseudo-terminal's master as it comes (so the child
    never blocks on a full terminal); the reader only collects, the test asserts."""

    def __init__(self, master: int) -> None:
        self.master, self._chunks, self._lock = master, bytearray(), threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: every process holding the terminal has exited
                return
            if not chunk:
                return
            with self._lock:
                self._chunks += chunk

    def text(self) -> str:
        with self._lock:
            return self._chunks.decode(errors="replace")

    def finish(self) -> str:
        self._reader.join(timeout=30)
        return self.text()


def test_a_second_ctrl_c_prints_its_last_line_below_the_bar(tmp_path: Path) -> None:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    screen = _Screen(master)
    env = child_env(tmp_path / "cache", TERM="xterm", COLUMNS="80", LINES="24")
    with OpenAIServer(lambda request: Reply.hang()) as server:
        command = scripted_run_args(server.base_url, tmp_path / "run", "--cases", "13,60", "--no-cache")
        process = start_edsb(command, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
        os.close(slave)
        ctrl_c_twice(process, lambda: "in flight" in screen.text(), screen.text)  # the bar is drawn: press
    text = screen.finish()
    os.close(master)
    assert process.returncode == 130
    last = text[text.rindex("stopped: ") :]
    assert last == f"stopped: 0 of 4 results kept in {tmp_path / 'run'}; rerun the same command to resume\r\n", last
    assert text.rindex("in flight") < text.rindex("stopped: ")  # the bar stays above, as it last was
    assert text.rfind(SHOW_CURSOR) > text.rfind(HIDE_CURSOR) >= 0
