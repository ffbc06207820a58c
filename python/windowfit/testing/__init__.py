"""Property-test your own windows: hypothesis strategies, the window invariant checker and
pytest fixtures (``pip install 'windowfit[testing]'``).

```python
from hypothesis import given
from windowfit.testing import budgets, check_window, histories

@given(data=st.data())
def test_my_trim(data, wf_counter):
    msgs = data.draw(histories())
    budget = data.draw(budgets(msgs, wf_counter))
    check_window(msgs, my_trim(msgs, budget), budget, wf_counter)
```

:func:`check_window` re-derives each invariant from the messages (it never calls ``fit``), so
it judges ``wf.fit`` and any other trim policy the same way. The strategies need
``hypothesis``; the checker and the fixtures do not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from windowfit.testing.invariants import (
    INVARIANTS,
    Analysis,
    WindowInvariantError,
    analyze,
    call_ids,
    check_window,
    has_content,
    is_system,
    is_user_turn,
    pins_tokens,
    priming,
    request_problems,
    result_ids,
    strip_calls,
)

if TYPE_CHECKING:
    from windowfit.testing.strategies import (
        LANGUAGES,
        budgets,
        histories,
        huge_texts,
        texts,
        valid_histories,
    )

_STRATEGIES = ("LANGUAGES", "budgets", "histories", "huge_texts", "texts", "valid_histories")

__all__ = [
    "INVARIANTS",
    "Analysis",
    "WindowInvariantError",
    "analyze",
    "call_ids",
    "check_window",
    "has_content",
    "is_system",
    "is_user_turn",
    "pins_tokens",
    "priming",
    "request_problems",
    "result_ids",
    "strip_calls",
    # strategies (need hypothesis; imported on first use)
    "LANGUAGES",
    "budgets",
    "histories",
    "huge_texts",
    "texts",
    "valid_histories",
]


def __getattr__(name: str) -> Any:
    # the strategies import hypothesis: only when asked for, so the checker works without it
    if name in _STRATEGIES:
        try:
            from windowfit.testing import strategies
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                f"windowfit.testing.{name} needs hypothesis: pip install 'windowfit[testing]'"
            ) from exc
        return getattr(strategies, name)
    raise AttributeError(f"module 'windowfit.testing' has no attribute {name!r}")
