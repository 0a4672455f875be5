from __future__ import annotations

import pytest

from edsb.geometry.relations import (
    DIRECTIONS,
    POSITION_CHECK_THRESHOLDS,
    RELATIONSHIP_PREFIXES,
    known_prefix,
    split_anchor,
    split_two_anchors,
)


def test_prefix_table_is_the_protocol_list() -> None:
    assert len(RELATIONSHIP_PREFIXES) == 13
    assert RELATIONSHIP_PREFIXES[0] == "close to" and RELATIONSHIP_PREFIXES[-1] == "look at"
    assert set(DIRECTIONS) <= set(RELATIONSHIP_PREFIXES)
    assert set(POSITION_CHECK_THRESHOLDS) == {*DIRECTIONS, "adjacent to", "close to", "inside"}


def test_prefix_test_is_a_plain_prefix() -> None:
    assert known_prefix("sit on chair_1") == "sit on"
    assert known_prefix("behindX") == "behind"  # accepted, as in the reference (docs/reference.md#prefix-predicates)
    assert known_prefix("near table_1") is None and known_prefix(" close to a_1") is None


def test_anchor_splitting_uses_single_spaces() -> None:
    assert split_anchor("to the left of sofa_1") == ("to the left of", "sofa_1")
    assert split_anchor("close to  sofa_1") == ("close to ", "sofa_1")
    assert split_two_anchors("between chair_1 and chair_3") == ("between", "chair_1", "chair_3")
    with pytest.raises(ValueError):
        split_two_anchors("between x")
