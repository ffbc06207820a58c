"""Recording each call's token usage and cost in a store, with quotas; reading a provider
response's usage into one meaning."""

from __future__ import annotations

from windowfit.usage.provider import extract_usage
from windowfit.usage.tracker import Quota, QuotaExceededError, UsageRecord, UsageTracker

__all__ = ["Quota", "QuotaExceededError", "UsageRecord", "UsageTracker", "extract_usage"]
