"""The HTTP boundary of the notifier: the only module that imports aiohttp.

Exception tree (everything the notifier raises about delivery):

- ``NotifyError`` - base
  - ``DeliveryError(target, reason, retryable)`` - one POST failed: ``retryable`` for a
    connection error, a timeout, HTTP 408/429/5xx; not for any other 4xx (the receiver
    refused the payload: retrying the same bytes cannot help)
  - ``GaveUp(target, reason, attempts)`` - ``deliver`` retried for ``give_up_s`` (or met a
    non-retryable error) and stopped: the caller dead-letters what it could not deliver
  - ``Stopped`` - the notifier is shutting down mid-retry: nothing is committed, the
    records are read again on restart

aiohttp's own exceptions never leave this module. URLs are logged as scheme://host:port
only (``config.where``): a Slack webhook's path is its secret.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable, Iterator

import aiohttp

from .config import where

log = logging.getLogger("faultline.notify")

RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
MAX_ERROR_BODY = 300


class NotifyError(Exception):
    """Base of the notifier's delivery errors."""


class DeliveryError(NotifyError):
    def __init__(self, target: str, reason: str, retryable: bool) -> None:
        super().__init__(f"{target}: {reason}")
        self.target = target
        self.reason = reason
        self.retryable = retryable


class Stopped(NotifyError):
    """Shutdown while a delivery was being retried."""


class GaveUp(NotifyError):
    def __init__(self, target: str, reason: str, attempts: int) -> None:
        super().__init__(f"{target}: gave up after {attempts} attempt(s): {reason}")
        self.target = target
        self.reason = reason
        self.attempts = attempts


def backoff(first_s: float, cap_s: float) -> Iterator[float]:
    """Capped exponential delays: first, 2x first, ... cap, cap, ..."""
    d = first_s
    while True:
        yield d
        d = min(d * 2, cap_s)


class Http:
    """One aiohttp session for every target (``async with Http(timeout_s) as h``)."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> "Http":
        self._session = aiohttp.ClientSession(timeout=self.timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def post_json(self, url: str, body: bytes, headers: dict[str, str] | None = None) -> int:
        """POST ``body`` (JSON bytes); returns the status (2xx) or raises ``DeliveryError``."""
        assert self._session is not None, "use `async with Http(...)`"
        target = where(url)
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        try:
            async with self._session.post(url, data=body, headers=hdrs, allow_redirects=False) as resp:
                if 200 <= resp.status < 300:
                    await resp.read()
                    return resp.status
                text = (await resp.text(errors="replace"))[:MAX_ERROR_BODY]
                raise DeliveryError(target, f"HTTP {resp.status}: {text.strip()}",
                                    retryable=resp.status in RETRYABLE_STATUS)
        except DeliveryError:
            raise
        except asyncio.TimeoutError:
            raise DeliveryError(target, f"no answer within {self.timeout.total:g} s", retryable=True) from None
        except aiohttp.ClientConnectionError as e:
            raise DeliveryError(target, f"cannot connect: {type(e).__name__}: {e}", retryable=True) from None
        except aiohttp.ClientError as e:
            raise DeliveryError(target, f"{type(e).__name__}: {e}", retryable=False) from None


async def deliver(send: Callable[[], Awaitable[object]], target: str, *, first_s: float, cap_s: float,
                  give_up_s: float, stop: asyncio.Event | None = None,
                  on_retry: Callable[[DeliveryError, int, float], None] | None = None) -> int:
    """Call ``send()`` until it succeeds; returns the number of attempts. Retries a
    retryable ``DeliveryError`` with capped exponential backoff; raises ``GaveUp`` on a
    non-retryable one or once ``give_up_s`` has passed; ``Stopped`` when ``stop`` is set."""
    t0 = time.monotonic()
    attempts = 0
    for delay in backoff(first_s, cap_s):
        attempts += 1
        try:
            await send()
            return attempts
        except DeliveryError as err:
            if not err.retryable:
                raise GaveUp(target, err.reason, attempts) from None
            left = give_up_s - (time.monotonic() - t0)
            if left <= 0:
                raise GaveUp(target, err.reason, attempts) from None
            wait = min(delay, left)
            if on_retry is not None:
                on_retry(err, attempts, wait)
            if stop is not None:
                try:
                    await asyncio.wait_for(stop.wait(), wait)
                    raise Stopped(f"{target}: stopped while retrying ({err.reason})") from None
                except asyncio.TimeoutError:
                    pass
            else:
                await asyncio.sleep(wait)
    raise AssertionError("unreachable")
