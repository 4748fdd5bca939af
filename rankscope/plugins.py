"""Loading the plugin packages: parsers and analyzers register themselves when imported."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable


def import_package_modules(package: str, path: Iterable[str]) -> None:
    """Import every module of ``package`` whose name does not start with ``_``.

    A new parser or analyzer is a new module of its package: nothing lists it elsewhere.
    """
    for mod in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{package}.{mod.name}")
