"""When to try a request again and how long to wait: exponential backoff, unless the server says how long."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

RETRYABLE_STATUSES = frozenset({408, 409, 429})


def is_retryable_status(status: int) -> bool:
    """Rate limits, timeouts reported by proxies and server errors may pass; other 4xx will not."""
    return status in RETRYABLE_STATUSES or status >= 500


@dataclass(frozen=True)
class RetryPolicy:
    """`max_retries` counts the extra attempts after the first; delays are in seconds (tests use tiny ones)."""

    max_retries: int = 5
    initial_delay_s: float = 1.0
    multiplier: float = 2.0
    max_delay_s: float = 60.0
    jitter: float = 0.25  # up to this fraction is added at random, so parallel requests do not retry in lockstep

    def delay_s(self, retry_number: int, retry_after_s: float | None = None) -> float:
        """The wait before retry `retry_number` (1-based); a server's Retry-After wins, capped at `max_delay_s`."""
        if retry_after_s is not None:
            return min(max(retry_after_s, 0.0), self.max_delay_s)
        backoff = min(self.max_delay_s, self.initial_delay_s * self.multiplier ** (retry_number - 1))
        return backoff * (1.0 + self.jitter * random.random())


def retry_after_s(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Seconds the server asked us to wait: OpenAI's `retry-after-ms`, else `Retry-After` as seconds or a date."""
    lowered = {name.lower(): value for name, value in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return float(millis) / 1000.0
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
