"""The shared cache (Redis in production), used so that its outage degrades, never breaks.

Rate limits, idempotency answers and debounce markers live in the cache. When Redis is
unreachable, a request must still be served: each helper here logs a warning and answers
as if the key were absent (``get``), or reports that nothing was stored (``add``/``set``
return ``None``), so the caller can choose how to go on without it.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.core.cache import cache

log = logging.getLogger(__name__)

_WARN_EVERY = 10.0
_last_warning = 0.0


def unavailable_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that mean "the cache server is unreachable" (not a bug of ours)."""
    errors: list[type[BaseException]] = [OSError]
    try:
        import redis

        errors.append(redis.exceptions.RedisError)
    except ImportError:  # pragma: no cover - redis is always installed with celery[redis]
        pass
    return tuple(errors)


def warn(what: str, exc: BaseException) -> None:
    """Log that the cache is down (at most every few seconds per process: an outage
    would otherwise log once per request)."""
    global _last_warning
    now = time.monotonic()
    if now - _last_warning >= _WARN_EVERY:
        _last_warning = now
        log.warning("shared cache unavailable (%s): %s: %s", what, type(exc).__name__, exc)


def get(key: str, default: Any = None) -> Any:
    try:
        return cache.get(key, default)
    except unavailable_errors() as exc:
        warn(f"get {key}", exc)
        return default


def add(key: str, value: Any, timeout: float | None) -> bool | None:
    """True if added, False if the key existed, None if the cache is unreachable."""
    try:
        return bool(cache.add(key, value, timeout=timeout))
    except unavailable_errors() as exc:
        warn(f"add {key}", exc)
        return None


def set(key: str, value: Any, timeout: float | None) -> bool | None:
    try:
        cache.set(key, value, timeout=timeout)
    except unavailable_errors() as exc:
        warn(f"set {key}", exc)
        return None
    return True


def delete(key: str) -> None:
    try:
        cache.delete(key)
    except unavailable_errors() as exc:
        warn(f"delete {key}", exc)
