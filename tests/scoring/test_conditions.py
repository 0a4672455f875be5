from __future__ import annotations

import numpy as np
import pytest

from edsb.scoring.conditions import (
    AllOf,
    AnyOf,
    Atom,
    ConditionSyntaxError,
    evaluate_condition,
    iter_atoms,
    parse_condition,
    tokenize,
)


def truth_table(**values: bool):
    return lambda atom: values[atom]


def test_atoms_are_trimmed_text_between_operators() -> None:
    assert tokenize(" between chair_1 and chair_3 ||(in front of chair_1&&x)") == [
        "between chair_1 and chair_3",
        "||",
        "(",
        "in front of chair_1",
        "&&",
        "x",
        ")",
    ]


def test_and_binds_tighter_than_or() -> None:
    assert parse_condition("a || b && c") == AnyOf((Atom("a"), AllOf((Atom("b"), Atom("c")))))
    assert evaluate_condition(parse_condition("a || b && c"), truth_table(a=True, b=False, c=False)) is True
    assert evaluate_condition(parse_condition("a || b && c"), truth_table(a=False, b=True, c=False)) is False


def test_parentheses_group() -> None:
    tree = parse_condition("(a || b) && c")
    assert tree == AllOf((AnyOf((Atom("a"), Atom("b"))), Atom("c")))
    assert evaluate_condition(tree, truth_table(a=False, b=True, c=True)) is True
    assert evaluate_condition(tree, truth_table(a=True, b=True, c=False)) is False


def test_official_condition_with_parentheses() -> None:
    tree = parse_condition("between chair_1 and chair_3 || (in front of chair_1 && in front of chair_3)")
    assert list(iter_atoms(tree)) == ["between chair_1 and chair_3", "in front of chair_1", "in front of chair_3"]


def test_every_atom_is_evaluated_left_to_right() -> None:
    seen: list[str] = []

    def record(atom: str) -> bool:
        seen.append(atom)
        return True

    assert evaluate_condition(parse_condition("a || b || (c && d)"), record) is True
    assert seen == ["a", "b", "c", "d"]


def test_an_error_in_a_later_atom_surfaces_even_when_an_earlier_one_decides() -> None:
    def check(atom: str) -> bool:
        if atom == "bad":
            raise KeyError(atom)
        return True

    with pytest.raises(KeyError):
        evaluate_condition(parse_condition("good || bad"), check)


def test_negation_is_left_to_the_caller() -> None:
    assert parse_condition("!eat && drink") == AllOf((Atom("!eat"), Atom("drink")))


@pytest.mark.parametrize(
    "text",
    ["a ) b", "(a || b", "a ||", "a && (b", "", "   ", "()", "a b ) (c"],
)
def test_malformed_conditions_raise_a_syntax_error(text: str) -> None:
    with pytest.raises(ConditionSyntaxError) as caught:
        parse_condition(text)
    assert isinstance(caught.value, SyntaxError)


def test_an_operator_where_an_operand_belongs_is_read_as_an_atom() -> None:
    # Parity with the reference parser, which only treats `(` specially in operand position.
    assert parse_condition("a && ||") == AllOf((Atom("a"), Atom("||")))
    assert parse_condition(")") == Atom(")")


def test_parsed_conditions_are_cached() -> None:
    assert parse_condition("sit on chair_2 || sit on chair_3") is parse_condition("sit on chair_2 || sit on chair_3")


def test_numpy_masks_combine_elementwise() -> None:
    masks = {
        "a": np.array([True, True, False, False]),
        "b": np.array([True, False, True, False]),
        "c": np.array([False, True, True, True]),
    }
    result = evaluate_condition(parse_condition("(a || b) && c"), masks.__getitem__)
    assert result.tolist() == [False, True, True, False]
