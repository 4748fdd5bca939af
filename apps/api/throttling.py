"""Per-token rate limit: a token bucket shared by every web process (Django cache).

The bucket holds ``RANKSCOPE_API_BURST`` requests and refills at ``RANKSCOPE_API_RATE``
per second. The burst must be at least the node count of the largest job, because every
node's epilog posts in the same second; the rate only matters after that.

With Redis as the cache the check is one Lua script (GCRA, using Redis' clock), so it
is atomic across processes and machines. Other cache backends (the embedded mode's file
cache, one machine) use a read-modify-write that may let a few extra requests through
under contention, which is harmless there.

When the cache is unreachable the limit fails open (the request is served and a
warning logged), so a Redis outage never turns into refused uploads.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.cache import cache
from rest_framework.throttling import BaseThrottle

from apps.api.permissions import request_token
from apps.lib import sharedcache

if TYPE_CHECKING:
    from rest_framework.request import Request
    from rest_framework.views import APIView

# GCRA: the bucket state is one number, the "theoretical arrival time" (tat).
# KEYS[1] = bucket key; ARGV = interval (s per request), burst.
# Returns {allowed (0/1), seconds to wait as a string}.
_GCRA_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local new_tat = tat + interval
local wait = new_tat - now - burst * interval
if wait > 0 then
  return {0, tostring(wait)}
end
redis.call('SET', KEYS[1], tostring(new_tat), 'PX', math.ceil((new_tat - now) * 1000) + 1000)
return {1, '0'}
"""


def _limits() -> tuple[float, int]:
    rate = settings.RANKSCOPE_API_RATE
    burst = settings.RANKSCOPE_API_BURST
    return max(rate, 1e-6), max(burst, 1)


def bucket_take(key: str) -> float:
    """Take one request from the bucket `key`; return 0.0 if allowed, else seconds to wait."""
    rate, burst = _limits()
    interval = 1.0 / rate
    full_key = cache.make_and_validate_key(f"ratelimit:{key}")
    redis_cache = getattr(cache, "_cache", None)
    if redis_cache is not None and hasattr(redis_cache, "get_client"):
        client = redis_cache.get_client(full_key, write=True)
        allowed, wait = client.eval(_GCRA_LUA, 1, full_key, repr(interval), str(burst))
        return 0.0 if int(allowed) else float(wait)
    now = time.time()
    tat = max(float(cache.get(f"ratelimit:{key}") or 0.0), now)
    new_tat = tat + interval
    wait = new_tat - now - burst * interval
    if wait > 0:
        return wait
    cache.set(f"ratelimit:{key}", new_tat, timeout=int(new_tat - now) + 2)
    return 0.0


class TokenBucketThrottle(BaseThrottle):
    """One bucket per token (per user for signed-in people); DRF answers 429 + Retry-After."""

    def __init__(self) -> None:
        self._wait = 0.0

    def allow_request(self, request: Request, view: APIView) -> bool:
        token = request_token(request)
        if token is not None:
            key = f"token:{token.prefix}"
        elif request.user and request.user.is_authenticated:
            key = f"user:{request.user.pk}"
        else:
            key = f"anon:{self.get_ident(request)}"
        try:
            self._wait = bucket_take(key)
        except sharedcache.unavailable_errors() as exc:
            # Fail open: refusing every request while Redis is away would lose uploads
            # (the epilog gives up after a few tries); the limit protects the server from
            # bursts, which the database and storage absorb for the length of an outage.
            sharedcache.warn("rate limit not enforced", exc)
            self._wait = 0.0
        return self._wait <= 0

    def wait(self) -> float | None:
        return self._wait
