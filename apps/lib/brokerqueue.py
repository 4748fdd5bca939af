"""How many messages wait in a broker queue: lets the auditor tell "still waiting behind
others" from "lost" before it re-sends work."""

from __future__ import annotations

import logging

from celery import current_app

log = logging.getLogger(__name__)


def queue_depth(name: str) -> int | None:
    """Messages waiting in queue ``name`` (not those a worker already took), or None
    when it cannot be told (broker down, a transport that does not say)."""
    try:
        with current_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1)
            size = getattr(conn.default_channel, "_size", None)
            if size is None:
                return None
            return int(size(name))
    except Exception as exc:  # the auditor carries on without the answer
        log.info("could not read the depth of queue %s: %s", name, exc)
        return None
