"""Django's Redis cache with one client object per connection pool, not one per call.

``django.core.cache.backends.redis.RedisCacheClient.get_client`` makes a new
``redis.Redis`` for every cache operation, and each copies redis-py's table of ~170
response callbacks: most of the client-side CPU of a ``get``/``add`` and of the rate
limit's script call, which every API request makes. The client only wraps the pool (the
connections live there), so one is made per pool and kept. Django keeps a cache backend
per thread, so a client is never shared between threads either; the commands sent, their
errors and timeouts are the same.
"""

from __future__ import annotations

from typing import Any

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient


class _PooledClients(RedisCacheClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        index = self._get_connection_pool_index(write)
        client = self._clients.get(index)
        if client is None:
            pool = self._get_connection_pool(write)
            client = self._clients[index] = self._client(connection_pool=pool)
        return client


class RedisCache(DjangoRedisCache):
    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _PooledClients
