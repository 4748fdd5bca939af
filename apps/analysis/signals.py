"""What the analysis app asks of, and announces to, the apps above it.

Analysis sits below investigation and postmortems, so it never imports them: the upper
apps connect receivers to these signals in their ``AppConfig.ready()``.
"""

from __future__ import annotations

from django.dispatch import Signal

# Sent before the engine runs. Arguments: ``incident``. Each receiver returns
# ``{host: number of the team's other incidents that blamed it}``; the counts are added
# up into ``engine.Options.history_hosts`` (repeat offenders).
host_history_requested = Signal()

# Sent after a run succeeded and its transaction is committed. Arguments: ``run``,
# ``incident``. Receivers must not fail the run: errors are logged and dropped.
analysis_succeeded = Signal()
