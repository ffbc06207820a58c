"""Large, deterministic tool outputs for the framework integration tests.

Each output is seeded by its tool arguments, so a tool called again with the same arguments
returns the same text (as a real file read would) and every test run sends the same tokens.
"""

from __future__ import annotations

import random

WORDS = (
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
)


def big_output(seed: str, words: int = 900, *, vocabulary: tuple[str, ...] = WORDS) -> str:
    """``words`` numbered words drawn from ``vocabulary`` by a generator seeded with ``seed``."""
    rng = random.Random(seed)
    return " ".join(rng.choice(vocabulary) + str(rng.randint(0, 99)) for _ in range(words))
