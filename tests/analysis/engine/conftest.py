"""Jobs generated once per session; triage runs the same path as the CLI (parse → JSON round-trip → analyze)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rankscope import analyze
from rankscope.cli import parse_paths
from rankscope.testing.generate import generate


def triage_dir(path: Path, **kw: Any) -> dict[str, Any]:
    return analyze(parse_paths([path], jobs=1, **kw))


class Jobs:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.cache: dict[tuple[Any, ...], tuple[Path, dict[str, Any], dict[str, Any]]] = {}

    def get(
        self, scenario: str, ranks: int = 128, **kw: Any
    ) -> tuple[Path, dict[str, Any], dict[str, Any]]:
        key = (scenario, ranks, tuple(sorted(kw.items())))
        if key not in self.cache:
            out = self.base / "_".join(
                str(k) for k in (scenario, ranks, *sorted(f"{a}-{b}" for a, b in kw.items()))
            )
            manifest = generate(scenario, out, ranks=ranks, **kw)
            self.cache[key] = (out, manifest, triage_dir(out))
        return self.cache[key]


@pytest.fixture(scope="session")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Jobs:
    return Jobs(tmp_path_factory.mktemp("jobs"))
