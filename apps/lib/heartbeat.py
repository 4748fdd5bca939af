"""A background heartbeat: call ``touch()`` every few seconds while long work runs.

Long work (a parse, an analysis run) marks its row alive from a small daemon thread,
so the auditor can tell a live worker from a dead one without waiting for a time
limit: when the worker process dies, the thread dies with it and the row goes quiet.

Model-free: the caller passes the touch, typically a one-row ``UPDATE … SET
heartbeat_at = now() WHERE pk = … AND <fence>``. Each touch runs in autocommit (the
thread never opens a transaction). A touch that returns ``False`` means the work no
longer owns its row (finished, or fenced out by a newer attempt): the thread stops.
A touch that raises (database briefly unreachable) is logged and tried again at the
next beat, on a fresh connection. The thread's own database connection is closed
when it ends.

Use it as a context manager so it stops on every exit path::

    with Heartbeat(touch, interval=10.0, name="parse-heartbeat-42"):
        do_the_long_work()

Do not start one while the calling thread is inside a transaction that has written
the row the touch updates: the touch would wait on that transaction's lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType

from django.db import connections

logger = logging.getLogger(__name__)


class Heartbeat:
    """Calls ``touch()`` every ``interval`` seconds in a daemon thread until stopped."""

    def __init__(
        self, touch: Callable[[], bool | None], *, interval: float, name: str = "heartbeat"
    ) -> None:
        if interval <= 0:
            raise ValueError(f"heartbeat interval must be positive, not {interval!r}")
        self.touch = touch
        self.interval = interval
        self.beats = 0
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop beating and wait for the thread (a touch in flight finishes first)."""
        self._stopped.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            while not self._stopped.wait(self.interval):
                try:
                    owned = self.touch()
                except Exception:
                    logger.warning(
                        "%s: touch failed; trying again", self._thread.name, exc_info=True
                    )
                    connections.close_all()  # this thread's connections only
                    continue
                self.beats += 1
                if owned is False:
                    return  # the row moved on (finished, or a newer attempt owns it)
        finally:
            connections.close_all()
