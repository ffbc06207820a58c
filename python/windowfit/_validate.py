"""The one check for a count argument (tokens, lines, bytes, a window size, an index).

Every public entry point that takes a count validates it here, so the rules and messages are
the same everywhere: a bool or a fraction is a type error (``True`` is not one token, and
``2.5`` tokens would be floored silently), an integral float such as ``8000.0`` is accepted,
NaN and values below the minimum are value errors naming the argument, and values beyond any
text are clamped to the core's ``i64`` range (infinity only where the argument allows it).
"""

from __future__ import annotations

import math
import operator
from typing import Any

from windowfit.errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["NO_LIMIT", "count_arg"]

#: the largest count the Rust core takes (i64): beyond any text, so "no limit"
NO_LIMIT = 2**63 - 1


def count_arg(name: str, value: Any, *, minimum: int = 0, infinite: bool = False) -> int:
    """``value`` as a count ``>= minimum``, or an error naming ``name``.

    ``infinite=True`` accepts ``float('inf')`` as "no limit" (``NO_LIMIT``).
    """
    if type(value) is int and minimum <= value <= NO_LIMIT:
        return value  # the usual case, first: entry points called per agent turn pay for this
    if isinstance(value, bool):
        raise ArgumentTypeError(f"{name} must be an int, not bool ({value!r})")
    if isinstance(value, float):
        if math.isnan(value):
            raise InvalidArgumentError(f"{name} is NaN")
        if math.isinf(value):
            if infinite and value > 0:
                return NO_LIMIT
            raise InvalidArgumentError(f"{name} must be a finite count, got {value!r}")
        if not value.is_integer():
            raise ArgumentTypeError(f"{name} must be a whole number, got {value!r}")
        n = int(value)
    else:
        try:
            n = operator.index(value)  # int and int-likes (numpy integers), nothing lossy
        except TypeError:
            raise ArgumentTypeError(f"{name} must be an int, not {type(value).__name__}") from None
    if n < minimum:
        raise InvalidArgumentError(f"{name} must be >= {minimum}, got {n}")
    return min(n, NO_LIMIT)
