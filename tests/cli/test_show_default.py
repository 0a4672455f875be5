"""`edsb show` without `-o`: a picture named after what it shows, in the current directory, and the user told where."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.support.edsb_cli import Outcome


def test_show_writes_a_named_picture_here_without_o(
    edsb: Callable[..., Outcome], finished: tuple[Path, list[str]], tmp_path: Path
) -> None:
    outcome = edsb("show", "13", "--distraction", "1")
    assert outcome.returncode == 0, outcome.stderr
    picture = tmp_path / "case13-d1.png"  # the fixture runs edsb in tmp_path
    assert picture.read_bytes().startswith(b"\x89PNG")
    assert "picture written to case13-d1.png" in outcome.stderr
    outcome = edsb("show", "13", "--run", finished[0], "--repeat", "2")
    assert outcome.returncode == 0, outcome.stderr
    assert (tmp_path / "case13-d0-r2-object-list.png").read_bytes().startswith(b"\x89PNG")
    assert "picture written to case13-d0-r2-object-list.png" in outcome.stderr
