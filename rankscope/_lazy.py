"""Import heavy optional modules, and compile regular expressions, on first use.

pyarrow takes about half a second to import, and a job made only of text logs never
touches it: the offline ``triage`` command should not pay for it. Likewise the parsers'
and the catalogue's ~270 regular expressions take ~40 ms to compile, and a small log uses
a few dozen of them.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from types import ModuleType
from typing import Any, cast


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


# what a compiled pattern offers; filled in from it at the first use
_PATTERN_API = (
    "search",
    "match",
    "fullmatch",
    "finditer",
    "findall",
    "sub",
    "subn",
    "split",
    "scanner",
    "flags",
    "groups",
    "groupindex",
)


class _Pattern:
    __slots__ = ("pattern", "_flags", *_PATTERN_API)

    def __repr__(self) -> str:
        return repr(re.compile(self.pattern, self._flags))

    def __reduce__(self) -> tuple[Any, ...]:
        return re.compile, (self.pattern, self._flags)


class _CompiledPattern(_Pattern):
    """A lazy pattern after its first use: plain slots, looked up as fast as a
    ``re.Pattern``'s methods (no ``__getattr__`` on the type to slow every lookup)."""

    __slots__ = ()


class _LazyPattern(_Pattern):
    __slots__ = ()

    def __init__(self, pattern: str | bytes, flags: int) -> None:
        self.pattern = pattern
        self._flags = flags

    def __getattr__(self, name: str) -> Any:
        # only called for a slot not filled yet: the first use of the pattern
        if name.startswith("__"):
            raise AttributeError(name)
        rx = re.compile(self.pattern, self._flags)
        for attr in _PATTERN_API:
            setattr(self, attr, getattr(rx, attr))
        self.__class__ = _CompiledPattern
        return getattr(rx, name)


def lazy_compile[S: (str, bytes)](pattern: S, flags: int = 0) -> re.Pattern[S]:
    """``re.compile(pattern, flags)``, compiled when first used. Offers what a compiled
    pattern does (``search``, ``match``, ``finditer``, ``sub``, ``pattern``, ``groupindex``…),
    at the same cost once compiled; it is not a ``re.Pattern`` to ``isinstance`` or to the
    module-level ``re`` functions (call its methods). A pattern a small log never needs is
    never compiled."""
    return cast("re.Pattern[S]", _LazyPattern(pattern, flags))
