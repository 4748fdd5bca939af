"""Loading the plugin packages: parsers and analyzers register themselves when imported."""

from __future__ import annotations

import importlib
import pkgutil

_loaded: set[str] = set()


def load_plugins(package: str) -> None:
    """Import, once, every module of ``package`` whose name does not start with ``_``.

    A new parser or analyzer is a new module of its package: nothing lists it elsewhere.
    """
    if package in _loaded:
        return
    _loaded.add(package)  # before importing: a module may look the registry up on import
    path = importlib.import_module(package).__path__
    for mod in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{package}.{mod.name}")
