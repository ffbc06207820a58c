"""Property-test your own windows: hypothesis strategies, the window invariant checker and
pytest fixtures (``pip install 'windowfit[testing]'``).

```python
from hypothesis import given, strategies as st
from windowfit.testing import budgets, check_window, histories

@given(data=st.data())
def test_my_trim(data, wf_counter):             # wf_counter: the pytest plugin's fixture
    msgs = data.draw(histories())
    budget = data.draw(budgets(msgs, wf_counter, feasible=True))
    check_window(msgs, my_trim(msgs, budget), budget, wf_counter)
```

:func:`check_window` re-derives each invariant from the messages (it never calls ``fit``), so
it judges ``wf.fit`` and any other trim policy the same way. The strategies need
``hypothesis``; the checker and the fixtures do not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from windowfit.testing import invariants as _invariants
from windowfit.testing.invariants import *  # noqa: F403 - the checker is the package's API

if TYPE_CHECKING:
    from windowfit.testing.strategies import (  # noqa: F401
        LANGUAGES,
        budgets,
        histories,
        huge_texts,
        texts,
        valid_histories,
    )

# the strategies import hypothesis: only when asked for, so the checker works without it
_STRATEGIES = ("LANGUAGES", "budgets", "histories", "huge_texts", "texts", "valid_histories")

__all__ = [*_invariants.__all__, *_STRATEGIES]


def __getattr__(name: str) -> Any:
    if name in _STRATEGIES:
        try:
            from windowfit.testing import strategies
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                f"windowfit.testing.{name} needs hypothesis: pip install 'windowfit[testing]'"
            ) from exc
        return getattr(strategies, name)
    raise AttributeError(f"module 'windowfit.testing' has no attribute {name!r}")
