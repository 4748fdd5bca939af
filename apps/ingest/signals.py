"""What the ingest app announces to the apps above it.

Ingest sits below analysis, so it never calls analysis: it sends these signals and the
apps that care connect their receivers in ``AppConfig.ready()``.
"""

from __future__ import annotations

from django.dispatch import Signal

# Every uploaded file of an incident has finished parsing (parsed, failed or rejected):
# sent once per input set, inside the transaction that writes the "ingest.parsed"
# timeline row while the incident row is locked. Arguments: ``incident``.
# A receiver that raises rolls that transaction back, so the next finisher tries again.
artifacts_parsed = Signal()
