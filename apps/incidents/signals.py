"""Extension points the incidents app offers to the apps above it.

Incidents is near the bottom of the app layers, so the incident page cannot import the
apps that fill it: they connect receivers in their ``AppConfig.ready()``.
"""

from __future__ import annotations

from django.dispatch import Signal

# Sent while the incident page (incidents/detail.html) is built, after the incident was
# fetched with its access check. Arguments: ``incident``, ``request``. Each receiver
# returns a dict merged into the template context.
incident_page_requested = Signal()
