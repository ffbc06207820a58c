"""Sessions: one conversation's full, append-only history in a store, and each consumer's
context-manager state beside it."""

from __future__ import annotations

from windowfit.session.session import Session
from windowfit.session.state import DEFAULT_CONSUMER, own_state, with_consumer_state

__all__ = ["DEFAULT_CONSUMER", "Session", "own_state", "with_consumer_state"]
