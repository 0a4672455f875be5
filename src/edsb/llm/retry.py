"""When to try a request again and how long to wait: exponential backoff, unless the server says how long; and the
one retry loop every remote client (aiohttp or a provider's SDK) sends through, so they all fail alike."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

from edsb.llm.errors import TransportError, TransportKind, transport_kind
from edsb.llm.refusals import ServerError, Verdict

RETRYABLE_STATUSES = frozenset({408, 409, 429})
# Connection failures before the endpoint has answered even once are most likely a wrong address or a server that is
# down: retry them only briefly, so a dead endpoint fails in seconds instead of minutes of backoff per run.
UNREACHED_MAX_RETRIES = 2
T = TypeVar("T")


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
    """Seconds the server asked us to wait: OpenAI's `retry-after-ms`, else `Retry-After` as seconds or a date, else
    when the exhausted rate limits reset (`rate_limit_reset_s`)."""
    lowered = {name.lower(): value for name, value in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return float(millis) / 1000.0
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return rate_limit_reset_s(lowered, now)
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


# A whole Go duration, checked before its parts are read: `findall` alone restarts at every digit of a digit flood
# with no unit (a header of a hostile server), which is quadratic (1.3 s for 8,000 digits). Anchored, each part must
# end in a unit letter, so a failed match backtracks over each part once: linear.
_DURATION_TEXT = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|h|m|s))+")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _reset_in_s(value: str, now: datetime) -> float | None:
    """A reset header's value as seconds from now: an RFC 3339 time (Anthropic), a Go duration such as `6m0s` or
    `59.5ms` (OpenAI, Groq), or plain seconds (Cerebras)."""
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    if _DURATION_TEXT.fullmatch(value):
        return sum(float(number) * _DURATION_UNITS[unit] for number, unit in _DURATION.findall(value))
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def rate_limit_reset_s(lowered: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Seconds until every exhausted rate limit resets, from the providers' own headers: Anthropic's
    `anthropic-ratelimit-<limit>-remaining` / `-reset`, and the `x-ratelimit-remaining-<limit>` /
    `x-ratelimit-reset-<limit>` of OpenAI, Groq and Cerebras. None when no limit says it is exhausted."""
    now = now or datetime.now(UTC)
    waits = []
    for name, remaining in lowered.items():
        reset = None
        if name.startswith("anthropic-ratelimit-") and name.endswith("-remaining"):
            reset = lowered.get(name.removesuffix("-remaining") + "-reset")
        elif name.startswith("x-ratelimit-remaining-"):
            reset = lowered.get("x-ratelimit-reset-" + name.removeprefix("x-ratelimit-remaining-"))
        if reset is None or remaining.strip() not in ("0", "0.0"):
            continue
        wait = _reset_in_s(reset, now)
        if wait is not None:
            waits.append(wait)
    return max(waits) if waits else None


class AttemptFailure(Exception):
    """One failed attempt, before the retry loop decides whether it was the last. `retry_after`: seconds the server
    asked for (a header, or Google's RetryInfo); `error`: the server's refusal as its body worded it."""

    def __init__(
        self,
        kind: TransportKind,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        error: ServerError | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: TransportKind = transport_kind(kind)
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.error = error

    @classmethod
    def http(cls, status: int, error: ServerError, retry_after: float | None = None) -> AttemptFailure:
        return cls("http", error.message, status=status, retry_after=retry_after, error=error)

    @property
    def retryable(self) -> bool:
        """Oversized replies are not asked for again within a run (a second one would cost as much); the run stays
        incomplete, and a resume asks again."""
        if self.kind == "oversized":
            return False
        return self.status is None or is_retryable_status(self.status)


class Reach:
    """Whether an endpoint has answered at all (any HTTP response): until it has, `unreachable` is retried briefly."""

    answered: bool = False


async def send_with_retries(
    attempt: Callable[[int], Awaitable[T]],
    policy: RetryPolicy,
    reach: Reach,
    describe: Callable[[AttemptFailure], str],
    judge: Callable[[AttemptFailure], Verdict] | None = None,
) -> T:
    """`attempt(number)` (1-based) until it succeeds, or a `TransportError` once the failure is final. `describe`
    makes the final failure's one-line message (redacted, with hints); `judge` says whose fault a refusal is (by
    default, the message's words)."""
    number = 0
    while True:
        number += 1
        try:
            return await attempt(number)
        except AttemptFailure as failure:
            if failure.kind != "unreachable":
                reach.answered = True
            max_retries = policy.max_retries
            if failure.kind == "unreachable" and not reach.answered:
                max_retries = min(max_retries, UNREACHED_MAX_RETRIES)
            if not failure.retryable or number > max_retries:
                message = describe(failure)
                verdict = judge(failure) if judge is not None else Verdict(False, None)
                raise TransportError(
                    failure.kind,
                    message,
                    attempts=number,
                    status=failure.status,
                    fix=verdict.fix,
                    prompt_fault=verdict.prompt_fault if judge is not None else None,
                ) from None
            await asyncio.sleep(policy.delay_s(number, failure.retry_after))
