"""The vocabulary of spatial relations: one table shared by the judge, the spatial code API, the sampler and the graph.

Relationship strings are `<predicate> <anchor>` (anchor = last word, split on single spaces) or, for the two-anchor
predicates, `<predicate> <anchor_1> and <anchor_2>` (anchors = words −3 and −1). Thresholds that decide verdicts or
costs live here too, so that nothing is duplicated between the modules that use them.
"""

from __future__ import annotations

from typing import Final, Literal

# --- planner-facing predicates ------------------------------------------------------------------------------------

CLOSE_TO: Final = "close to"
ADJACENT_TO: Final = "adjacent to"
INTERACT_WITH: Final = "interact with"
INSIDE: Final = "inside"
SIT_ON: Final = "sit on"
LIE_ON: Final = "lie on"
LEFT_OF: Final = "to the left of"
RIGHT_OF: Final = "to the right of"
IN_FRONT_OF: Final = "in front of"
BEHIND: Final = "behind"
BETWEEN: Final = "between"
ALIGNED_WITH: Final = "aligned with"
LOOK_AT: Final = "look at"

#: Every relationship a plan may contain must start with one of these (in the order of
#: docs/reference.md#relationship-check; the judge's prefix test).
RELATIONSHIP_PREFIXES: Final[tuple[str, ...]] = (
    CLOSE_TO,
    ADJACENT_TO,
    INTERACT_WITH,
    INSIDE,
    SIT_ON,
    LIE_ON,
    LEFT_OF,
    RIGHT_OF,
    IN_FRONT_OF,
    BEHIND,
    BETWEEN,
    ALIGNED_WITH,
    LOOK_AT,
)

Direction = Literal["in front of", "behind", "to the left of", "to the right of"]
#: Directions are "as seen by the anchor": its front is where its orientation vector points.
DIRECTIONS: Final[tuple[Direction, ...]] = (IN_FRONT_OF, BEHIND, LEFT_OF, RIGHT_OF)

INTERACTION_PREDICATES: Final[tuple[str, ...]] = (SIT_ON, LIE_ON)
#: The posture each interaction implies: a character that sits on a chair also does the action `sit`.
POSTURES: Final[dict[str, str]] = {SIT_ON: "sit", LIE_ON: "lie"}
TwoAnchorKind = Literal["between", "aligned with"]
TWO_ANCHOR_PREDICATES: Final[tuple[TwoAnchorKind, ...]] = (BETWEEN, ALIGNED_WITH)

# --- scene-graph-only predicates ----------------------------------------------------------------------------------

ON: Final = "on"
EMBEDDED_IN: Final = "embedded in"
ABOVE: Final = "above"
BELOW: Final = "below"

# --- thresholds ---------------------------------------------------------------------------------------------------

#: PI position check (docs/reference.md#position-check): an atom holds when its distance is at most this many metres.
POSITION_CHECK_THRESHOLDS: Final[dict[str, float]] = {
    LEFT_OF: 0.1,
    RIGHT_OF: 0.1,
    IN_FRONT_OF: 0.1,
    BEHIND: 0.1,
    ADJACENT_TO: 0.7,
    CLOSE_TO: 1.4,
    INSIDE: 0.1,
}

#: Sampler distance terms (docs/reference.md#position-sampler): free below this footprint distance. `on the side of` is
#: configured, never produced.
SAMPLER_DISTANCE_THRESHOLDS: Final[dict[str, float]] = {"on the side of": 0.5, ADJACENT_TO: 0.5, CLOSE_TO: 1.0}
#: Lateral slack of the directional cost's zero region (docs/reference.md#position-sampler); the judge uses none.
SAMPLER_DIRECTIONAL_OFFSET: Final = 0.1
#: Margin kept from the seat's sides and front edge by the interaction term (docs/reference.md#distances).
INTERACTION_OFFSET: Final = 0.2
#: Two-anchor tolerances (docs/reference.md#position-sampler): distance to the centre line tolerated for free, and
#: overshoot beyond the ends as a fraction of the anchors' separation (`between` allows none, whatever is configured).
TWO_ANCHOR_ORTHOGONAL_TOLERANCE: Final[dict[str, float]] = {BETWEEN: 0.5, ALIGNED_WITH: 0.3}
TWO_ANCHOR_ALONG_TOLERANCE: Final = 1.0

#: |min_z| at or below this makes an object floor-standing for collisions (the graph uses a strict `<`,
#: docs/reference.md#floor-tests).
FLOOR_TOLERANCE: Final = 0.1


def split_anchor(relationship: str) -> tuple[str, str]:
    """(predicate, anchor) of `<predicate> <anchor>`; splits on single spaces as the reference does."""
    words = relationship.split(" ")
    return " ".join(words[:-1]), words[-1]


def split_two_anchors(relationship: str) -> tuple[str, str, str]:
    """(predicate, anchor_1, anchor_2) of `<predicate> <anchor_1> and <anchor_2>` (words −3 and −1)."""
    words = relationship.split(" ")
    if len(words) < 3:
        raise ValueError(f"not a two-anchor relationship: {relationship!r}")
    return " ".join(words[:-3]), words[-3], words[-1]


def known_prefix(relationship: str) -> str | None:
    """The first listed prefix the text starts with, or None (a prefix test: `behindX` is accepted,
    docs/reference.md#prefix-predicates)."""
    return next((prefix for prefix in RELATIONSHIP_PREFIXES if relationship.startswith(prefix)), None)
