"""The Redis broker transport, made to survive losing Redis while tasks are in flight.

When the connection to Redis drops while a worker holds unacknowledged messages (with
late acknowledgement, nearly always under load), Celery closes the connection to start
over; closing the channel first tries to put those messages back, which needs a new Redis
client built from the connection's parameters — but the connection has already let go of
them. kombu then raises ``AttributeError: 'NoneType' object has no attribute 'hostname'``,
which is not a connection error, so the worker exits ("Unrecoverable error") instead of
reconnecting. Reproduced by the Redis-outage recovery drill
(tests/resilience/test_recovery_drill.py) with celery 5.7.0, kombu 5.7.0, redis-py 8.1.0.

Here the same situation raises a Redis ``ConnectionError``: Celery ignores connection
errors while closing, and reconnects. The messages stay in Redis' unacknowledged set and
come back after the visibility timeout; the auditor re-sends their work long before that.
Installed by ``apps.celery`` for the ``redis://`` and ``rediss://`` schemes.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> Any:
        if self.connection.client is None:
            import redis

            raise redis.exceptions.ConnectionError("the broker connection was closed")
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel


def install() -> None:
    """Make ``redis://`` and ``rediss://`` broker URLs use this transport."""
    from kombu.transport import TRANSPORT_ALIASES

    for scheme in ("redis", "rediss"):
        TRANSPORT_ALIASES[scheme] = "apps.lib.brokertransport:Transport"
