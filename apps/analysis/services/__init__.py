"""Writes for analysis: request a run, execute it, audit stuck work.

The engine (``rankscope``) is pure; this module is the Django side around
it: which artifacts form the input set, loading their parse results from storage,
the run row with its status/progress/fence, findings, the incident's severity and
the timeline row saying what was concluded.

A package by step of a run's life; every public name is re-exported here, so callers
keep writing ``from apps.analysis import services`` and ``services.analysis_request(...)``.
"""

from apps.analysis.services.audit import (
    AuditReport,
    analysis_audit,
)
from apps.analysis.services.execute import (
    PROGRESS_WRITES_PER_SECOND,
    analysis_execute,
)
from apps.analysis.services.inputs import (
    analysis_fingerprint,
    artifact_parse_result_load,
)
from apps.analysis.services.request import (
    analysis_request,
    analysis_settle_cancel,
    analysis_settle_check,
    settle_key,
)

__all__ = [
    "PROGRESS_WRITES_PER_SECOND",
    "AuditReport",
    "analysis_audit",
    "analysis_execute",
    "analysis_fingerprint",
    "analysis_request",
    "analysis_settle_cancel",
    "analysis_settle_check",
    "artifact_parse_result_load",
    "settle_key",
]
