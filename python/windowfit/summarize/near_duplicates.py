"""Finding a summary line's near-duplicate among the lines already kept, without comparing
it with every one of them.

The offline summarizer keeps a line unless an earlier kept line of the same section says
nearly the same thing: for sentences, shared content terms covering at least
``SIMILARITY`` of the smaller term set; for identifiers, one text inside the other. Comparing
each line with every kept line is quadratic, so a long imported history (thousands of
messages folded at once) took minutes. :class:`NearDuplicateIndex` finds the same first
match through inverted indexes, verifying only the lines that can possibly match:

- two term sets sharing at least ``t`` terms, where ``t`` is the overlap the smaller set
  (size ``m``) needs, must share one of any ``m - t + 1`` terms of the smaller set (its
  "probe": the rarest ones, whose postings are short). So a line is looked up by its probe
  among all terms of kept lines, and by all its terms among the probes of kept lines;
- a text inside another contains the inner text's rarest ``GRAM``-character piece (or the
  whole inner text, when shorter), so identifiers are indexed the same way by substrings.

Candidates are verified with the exact rule, in kept order, so the first match is the one
the pairwise scan would find.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

__all__ = ["SIMILARITY", "NearDuplicateIndex", "similar_terms", "required_overlap"]

#: Share of the smaller term set two sentences must have in common to be near-duplicates.
SIMILARITY = 0.8
#: Length of the substrings identifiers are indexed by.
GRAM = 3
IDENTIFIERS = "identifiers"


class _Line(Protocol):
    section: str
    text: str
    terms: frozenset[str]


def similar_terms(a: frozenset[str], b: frozenset[str]) -> bool:
    """Two sentences' term sets say nearly the same thing."""
    return bool(a and b and len(a & b) / min(len(a), len(b)) >= SIMILARITY)


def required_overlap(size: int) -> int:
    """The fewest shared terms making a set of ``size`` terms similar to a set as large or
    larger (computed with the same float test ``similar_terms`` uses)."""
    need = max(1, int(size * SIMILARITY) - 1)
    while need / size < SIMILARITY:
        need += 1
    return need


def _pieces(text: str) -> set[str]:
    """Every substring of ``text`` up to ``GRAM`` characters long (the empty one too)."""
    n = len(text)
    out = {""}
    for width in range(1, GRAM + 1):
        out.update(text[i : i + width] for i in range(n - width + 1))
    return out


def _grams(text: str) -> list[str]:
    """The ``GRAM``-character pieces of ``text``, or the text itself when shorter."""
    if len(text) <= GRAM:
        return [text]
    return [text[i : i + GRAM] for i in range(len(text) - GRAM + 1)]


class NearDuplicateIndex:
    """Kept lines by section, indexed so a new line's first near-duplicate is found by
    verifying only the kept lines sharing one of its rarest terms or substrings."""

    def __init__(self, lines: Sequence[Any]) -> None:
        self._term_df: Counter[str] = Counter()
        self._gram_df: Counter[str] = Counter()
        for line in lines:
            if line.section == IDENTIFIERS:
                self._gram_df.update(set(_grams(line.text)))
            else:
                self._term_df.update(line.terms)
        # section -> key -> kept positions (a stale position only costs a verification)
        self._full: dict[str, dict[str, set[int]]] = {}
        self._probe: dict[str, dict[str, set[int]]] = {}
        # identifiers too short to have a probe piece are rare: they are checked one by one
        self._identifiers: set[int] = set()
        #: How many kept lines were compared with a new line (the work the index saves).
        self.comparisons = 0

    def _probe_terms(self, terms: frozenset[str]) -> list[str]:
        size = len(terms)
        rarest = sorted(terms, key=lambda t: (self._term_df[t], t))
        return rarest[: size - required_overlap(size) + 1]

    def _probe_gram(self, text: str) -> str:
        return min(_grams(text), key=lambda g: (self._gram_df[g], g))

    def add(self, line: _Line, position: int) -> None:
        """Index ``line`` as the kept line at ``position`` (new, or replacing another)."""
        full = self._full.setdefault(line.section, {})
        probe = self._probe.setdefault(line.section, {})
        if line.section == IDENTIFIERS:
            every: Iterable[str] = _grams(line.text)
            probes: Iterable[str] = (self._probe_gram(line.text),)
            self._identifiers.add(position)
        elif line.terms:
            every, probes = line.terms, self._probe_terms(line.terms)
        else:
            return
        for key in every:
            full.setdefault(key, set()).add(position)
        for key in probes:
            probe.setdefault(key, set()).add(position)

    def _candidates(self, line: _Line) -> Iterable[int]:
        full = self._full.get(line.section, {})
        probe = self._probe.get(line.section, {})
        if line.section == IDENTIFIERS:
            if len(line.text) <= GRAM:
                return sorted(self._identifiers)  # may sit inside any kept identifier
            # kept texts holding this one hold its probe piece; texts inside it are found
            # by their probe piece, one of this text's short substrings
            smaller: Iterable[str] = _pieces(line.text)
            larger: Iterable[str] = (self._probe_gram(line.text),)
        elif line.terms:
            smaller, larger = line.terms, self._probe_terms(line.terms)
        else:
            return ()
        found: set[int] = set()
        for key in larger:
            found.update(full.get(key, ()))
        for key in smaller:
            found.update(probe.get(key, ()))
        return sorted(found)

    def first_match(self, line: _Line, kept: Sequence[_Line]) -> int | None:
        """The position of the first kept line ``line`` is a near-duplicate of, or None."""
        for k in self._candidates(line):
            other = kept[k]
            self.comparisons += 1
            if other.section == line.section and _same(line, other):
                return k
        return None


def _same(line: _Line, other: _Line) -> bool:
    if line.section == IDENTIFIERS:
        return line.text in other.text or other.text in line.text
    return similar_terms(line.terms, other.terms)
