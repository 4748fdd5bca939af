"""The apps depend on each other one way only.

accounts ← incidents ← ingest ← analysis ← investigation / postmortems ← api / demo,
with ``apps/lib`` (model-free helpers) and the engine (``rankscope``) below them all.
A lower app tells the upper ones what happened through signals it defines
(``apps/<app>/signals.py``); the upper app connects in ``AppConfig.ready()``.

Every import statement counts, at module level or inside a function, and no import may
be hedged with ``except ImportError``: every app is always installed. There is no list
of tolerated exceptions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ROOT / "apps"

# Lower number = lower layer. Apps on the same layer must not import each other.
LAYERS = {
    "lib": 0,
    "accounts": 1,
    "incidents": 2,
    "ingest": 3,
    "analysis": 4,
    "investigation": 5,
    "postmortems": 5,
    "api": 6,
    "demo": 6,
}


def _modules() -> list[Path]:
    return sorted(p for p in APPS.rglob("*.py") if "migrations" not in p.parts)


def _app_of(path: Path) -> str | None:
    rel = path.relative_to(APPS)
    return rel.parts[0] if len(rel.parts) > 1 else None  # None: the project package


def _imported_modules(node: ast.Import | ast.ImportFrom, path: Path) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:  # relative: resolve against the importing module's package
        package = path.relative_to(ROOT).with_suffix("").parts[: -node.level]
        base = ".".join(package)
        module = f"{base}.{node.module}" if node.module else base
    else:
        module = node.module or ""
    # "from apps import ingest" / "from apps.ingest import services" name modules too.
    return [module, *(f"{module}.{alias.name}" for alias in node.names)]


# The project package wires every app (settings, URLs, the Celery app): no app imports it.
# Code reads django.conf.settings and celery.current_app instead.
PROJECT_MODULES = {"settings", "urls", "celery", "celery_app", "wsgi", "asgi"}


def _target_app(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) >= 2 and parts[0] == "apps" and parts[1] in LAYERS:
        return parts[1]
    return None


def _imports(path: Path) -> list[tuple[int, str, str]]:
    """(line, imported module, app) of every import of another app, or of the project
    package, in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    own = _app_of(path)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        for module in _imported_modules(node, path):
            parts = module.split(".")
            if len(parts) >= 2 and parts[0] == "apps" and parts[1] in PROJECT_MODULES:
                found.append((node.lineno, module, "the project package"))
                break
        seen: set[str] = set()
        for module in _imported_modules(node, path):
            app = _target_app(module)
            if app is not None and app != own and app not in seen:
                seen.add(app)
                found.append((node.lineno, module, app))
    return found


def _violations(path: Path) -> list[str]:
    own = _app_of(path)
    if own is None:
        return []  # the project package (settings, urls, celery) wires every app
    assert own in LAYERS, f"apps/{own}/ is not placed in a layer in {__file__}"
    rel = path.relative_to(ROOT)
    return sorted(
        {
            f"{rel}:{line} {own} imports {module} ({app} is not below {own})"
            for line, module, app in _imports(path)
            if app not in LAYERS or LAYERS[app] >= LAYERS[own]
        }
    )


def _import_error_hedges(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    hedges = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        imports_an_app = any(
            _target_app(module) is not None
            for stmt in node.body
            for inner in ast.walk(stmt)
            if isinstance(inner, ast.Import | ast.ImportFrom)
            for module in _imported_modules(inner, path)
        )
        catches_import_error = any(
            handler.type is not None and "ImportError" in ast.unparse(handler.type)
            for handler in node.handlers
        )
        if imports_an_app and catches_import_error:
            hedges.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return hedges


def test_every_app_is_placed_in_a_layer():
    apps = {p.name for p in APPS.iterdir() if (p / "__init__.py").exists()}
    assert apps == set(LAYERS)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(APPS)))
def test_apps_import_only_the_layers_below_them(path):
    assert _violations(path) == []


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(APPS)))
def test_no_installed_app_is_imported_behind_an_import_error_hedge(path):
    assert _import_error_hedges(path) == []


def test_the_check_sees_imports_inside_functions(tmp_path, monkeypatch):
    fake = APPS / "ingest" / "services.py"
    source = "def f():\n    from apps.analysis.services import analysis_request\n"
    monkeypatch.setattr(Path, "read_text", lambda self, **kw: source)
    assert _violations(fake) == [
        "apps/ingest/services.py:2 ingest imports apps.analysis.services"
        " (analysis is not below ingest)"
    ]


def test_the_check_sees_imports_of_the_project_package(monkeypatch):
    fake = APPS / "lib" / "health.py"
    source = "def f():\n    from apps.celery import app\n"
    monkeypatch.setattr(Path, "read_text", lambda self, **kw: source)
    assert _violations(fake) == [
        "apps/lib/health.py:2 lib imports apps.celery (the project package is not below lib)"
    ]


def test_the_check_sees_siblings_and_hedges(monkeypatch):
    fake = APPS / "investigation" / "views.py"
    source = "try:\n    from apps import postmortems\nexcept ImportError:\n    pass\n"
    monkeypatch.setattr(Path, "read_text", lambda self, **kw: source)
    assert _violations(fake) == [
        "apps/investigation/views.py:2 investigation imports apps.postmortems"
        " (postmortems is not below investigation)"
    ]
    assert _import_error_hedges(fake) == ["apps/investigation/views.py:1"]
