"""Plain values on the worker's side of the wire: valid Unicode only, numpy scalars as Python values."""

from __future__ import annotations

import json

import numpy as np

from edsb.sandbox.wire import Opaque, clean_plain, encode_plain, replace_surrogates, to_plain


def test_every_surrogate_code_point_becomes_the_replacement_character() -> None:
    text = "a\ud800b\udfffc\ud83d\ude00"  # a lone high, a lone low, and a pair (two code points in a Python str)
    assert replace_surrogates(text) == "a\ufffdb\ufffdc\ufffd\ufffd"
    kept = "plain ascii and \U0001f600 and é"
    assert replace_surrogates(kept) is kept  # nothing to do: the same object, so callers can tell
    replace_surrogates(text).encode("utf-8")


def test_clean_plain_reaches_every_string_and_says_whether_it_changed() -> None:
    value = ["ok", ("\ud800", ["x", "\udc00"]), Opaque("Area", "Area(['\ud801'])", False), 3, None]
    cleaned, changed = clean_plain(value)
    assert changed
    assert cleaned == ["ok", ("\ufffd", ["x", "\ufffd"]), Opaque("Area", "Area(['\ufffd'])", False), 3, None]
    json.dumps(encode_plain(cleaned), ensure_ascii=False).encode("utf-8")
    untouched = ["a", ("b",), 1.5]
    assert clean_plain(untouched) == (untouched, False) and clean_plain(untouched)[0] is untouched


def test_numpy_scalars_travel_as_python_values() -> None:
    value = [np.float64(1.5), np.float32(2.0), np.int64(3), np.bool_(True), np.str_("eat")]
    plain = to_plain(value)
    assert plain == [1.5, 2.0, 3, True, "eat"]
    assert [type(v) for v in plain] == [float, float, int, bool, str]  # type: ignore[union-attr]
    assert to_plain(np.zeros(2)) == Opaque("ndarray", "array([0., 0.])", False)
