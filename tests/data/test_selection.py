import pytest

from edsb.data.benchmark import Benchmark
from edsb.data.selection import describe_ids, parse_levels, select_cases
from edsb.errors import UsageError
from tests.support.data import DATA

CASES = Benchmark.open(DATA).cases


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0-4,60", [0, 1, 2, 3, 4, 60]),
        ("13, 60", [13, 60]),
        ("PI", list(range(60, 70))),
        ("oa", [0, 1, 2, 3, 4, 30, 31, 32, 33, 34, 40, 41, 42, 43, 44]),
        ("OA,RC", sorted({*range(5), *range(10, 15), *range(30, 35), *range(40, 45), *range(50, 55)})),
        ("SS,0", [0, 20, 21, 22, 23, 24, 40, 41, 42, 43, 44, 50, 51, 52, 53, 54]),
        ("0-100", sorted(CASES)),
        (None, sorted(CASES)),
        ("all", sorted(CASES)),
    ],
)
def test_selection(text, expected) -> None:
    assert select_cases(text, CASES) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("5", "unknown case id 5"),
        ("XY", "unknown case selector 'XY'"),
        ("5-9", "matches no case"),
        ("4-1", "empty case range"),
        (",", "empty item in case selection ','"),
        ("13,,60", "empty item in case selection '13,,60'"),
        ("", "empty case selection"),
        ("  ", "empty case selection"),
        ("13,", "empty item"),
    ],
)
def test_bad_selection(text, message) -> None:
    with pytest.raises(UsageError, match=message):
        select_cases(text, CASES)


def test_levels() -> None:
    assert parse_levels("0-2") == [0, 1, 2]
    assert parse_levels("2,0") == [0, 2]
    assert parse_levels(None) == [0, 1, 2]
    with pytest.raises(UsageError, match="level 3 does not exist"):
        parse_levels("0-3")
    with pytest.raises(UsageError):
        parse_levels("-1")
    with pytest.raises(UsageError, match="empty distraction level selection"):
        parse_levels("")
    with pytest.raises(UsageError, match="empty item in distraction level selection '0,,2'"):
        parse_levels("0,,2")


def test_describe_ids() -> None:
    assert describe_ids([4, 0, 1, 2, 3, 60, 62, 61, 9]) == "0-4, 9, 60-62"
