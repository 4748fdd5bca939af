"""List filters: a filter the user left empty narrows nothing."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet


def filter_given[QS: QuerySet](qs: QS, **lookups: Any) -> QS:
    """``qs`` narrowed by each lookup whose value was given (not ``""`` nor ``None``;
    a zero is a value)."""
    given = {name: value for name, value in lookups.items() if value is not None and value != ""}
    return qs.filter(**given) if given else qs
