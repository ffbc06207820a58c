"""``observation.count_lines`` is the core's line rule, bound: checked against the rule
written out in Python (a line per newline, plus a last line without one)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from windowfit.truncation import count_lines


@given(st.text(alphabet=st.sampled_from("ab\n\r\u2028é🙂\ud800"), max_size=40))
def test_count_lines_is_the_documented_rule(text: str) -> None:
    assert count_lines(text) == text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def test_count_lines_edges() -> None:
    assert [count_lines(t) for t in ("", "a", "a\n", "a\nb", "\n\n", "\ud800\n")] == [
        0,
        1,
        1,
        2,
        2,
        1,
    ]
