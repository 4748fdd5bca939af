"""JSON uploads that people write by hand or by script: one document, or one object a line."""

from __future__ import annotations

import json
from typing import Any


def json_document_or_lines(body: str, lines: list[tuple[int, str]]) -> Any:
    """``body`` as one JSON document; when it is not one, the list of ``lines`` that are
    JSON each (JSON lines), the others skipped."""
    try:
        return json.loads(body)
    except ValueError:
        pass
    objs: list[Any] = []
    for _, t in lines:
        try:
            objs.append(json.loads(t))
        except ValueError:
            continue
    return objs
