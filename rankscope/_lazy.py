"""Import heavy optional modules on first use.

pyarrow takes about half a second to import, and a job made only of text logs never
touches it: the offline ``triage`` command should not pay for it.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands in for ``import NAME as alias``; the real import happens on first attribute."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}{' (loaded)' if self._module else ''}>"
