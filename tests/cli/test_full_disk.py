"""`edsb run` on a disk that is full (a real tmpfs, filled): one line naming the file, saying nothing is lost and
that the same command goes on; no temporary file left behind, however often it is retried; and once there is space,
that same command finishes the runs."""

from __future__ import annotations

from pathlib import Path

from tests.support.run_dir import read_results
from tests.support.small_disk import PAGE, fill, leftovers, small_disk

FULL = "no space left on device; nothing already written is lost: free some space and run the same command again"


def test_a_full_disk_is_one_line_and_the_same_command_resumes(edsb, tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        out = disk / "oracle"
        args = ("run", "--model", "oracle", "--cases", "13,60", "--quiet", "--out", out)
        # 1. Nothing fits: config.json is refused, twice, and no config.tmp stays.
        filler = fill(disk)
        for _ in range(2):
            edsb(*args).assert_one_clear_error(1, contains=f"{out / 'config.json'}: {FULL}")
            assert leftovers(disk) == []
        # 2. config.json fits, a run's transcript does not: that file is named.
        filler.unlink()
        filler = fill(disk, leave=PAGE)
        outcome = edsb(*args)
        outcome.assert_one_clear_error(1, contains=f"{out / 'transcripts' / 'requests.jsonl'}: {FULL}")
        assert (out / "config.json").is_file() and leftovers(disk) == []
        # 3. Space again: the same command finishes every run.
        filler.unlink()
        assert edsb(*args).returncode == 0
        assert sorted(r["status"] for r in read_results(out)) == ["passed"] * 4
        assert leftovers(disk) == []
