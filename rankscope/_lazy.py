"""Import heavy optional modules on first use.

pyarrow takes about half a second to import, and a job made only of text logs never
touches it: the offline ``triage`` command should not pay for it.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
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


def lazy_module(name: str) -> ModuleType:
    """The module ``name``, imported on its first attribute access (the standard library's
    ``LazyLoader``: after that first access it is the plain module, with no per-access
    cost). numpy takes ~0.1 s to import, which a small text log never needs: the offline
    command's start-up on a tiny file stays well under a quarter of a second."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
