"""Someone signed in, but in another team, cannot see or change anything of ours — on
every URL of every app: pages, htmx partials, downloads and the API.

The URL list is read from the resolver, so a new URL is tested the day it is added.
Each of its keyword arguments is filled with an object of the team the outsider is not
in; a keyword this module does not know fails the test (add the object kind below), so
a new URL cannot slip through. For each URL, GET and POST must answer exactly as they
do for an object that does not exist (404 — or 405 when the view does not take that
method; 403/404 JSON for the API), and the database must not change.

URLs without an object in them (lists, forms that create) must not show the other
team's objects, and an empty POST must change nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.db import models
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from apps.accounts import services as account_services
from apps.accounts.models import ApiToken, Team
from apps.incidents.models import Incident
from apps.incidents.services import incident_create
from apps.ingest.models import Artifact
from apps.investigation import services as investigation_services
from apps.postmortems import services as postmortem_services

pytestmark = pytest.mark.django_db

# Django's own URLs, or open to anyone by design: they hold nothing of a team.
NOT_TEAM_URLS = {
    "<root>": "redirects to the incident list",
    "healthz": "database and broker health, no team data",
    "login": "the sign-in page",
    "logout": "signs out whoever asks",
}
EXCLUDED_NAMESPACES = {"admin": "Django's admin: staff only, and covered by Django"}

# POST data that would change something if the access check were missing.
PAYLOAD = {
    "title": "outsider was here",
    "text": "outsider was here",
    "body": "outsider was here",
    "section": "general",
    "status": "closed",
    "phase": "localization",
    "note": "outsider was here",
    "why": "why?",
    "answer": "because",
    "kind": "immediate",
    "checklist": "pre_training",
    "test_result": "outsider",
    "test_plan": "outsider",
    "baseline": "step_time: 1",
    "post_fix": "step_time: 2",
    "name": "outsider token",
    "scope": "write",
    "expected_revision": "1",
}


@dataclass(frozen=True)
class Route:
    name: str  # namespaced, e.g. "investigation:hypothesis_edit"; "<root>" for the unnamed root
    route: str  # the full pattern, for messages
    kwargs: tuple[str, ...]

    @property
    def namespace(self) -> str:
        return self.name.split(":", 1)[0] if ":" in self.name else ""

    @property
    def is_api(self) -> bool:
        return self.namespace == "api"


_KWARG = re.compile(r"<(?:\w+:)?(\w+)>")


def _walk(patterns: list[Any], prefix: str = "", namespace: str = "") -> Iterator[Route]:
    for p in patterns:
        if isinstance(p, URLResolver):
            if p.namespace in EXCLUDED_NAMESPACES:
                continue
            ns = ":".join(filter(None, [namespace, p.namespace or ""]))
            yield from _walk(p.url_patterns, prefix + str(p.pattern), ns)
        elif isinstance(p, URLPattern):
            route = prefix + str(p.pattern)
            name = f"{namespace}:{p.name}" if namespace and p.name else (p.name or "")
            if not name and route == "":
                name = "<root>"
            yield Route(name=name or route, route=route, kwargs=tuple(_KWARG.findall(route)))


ROUTES = sorted(_walk(get_resolver().url_patterns), key=lambda r: r.name)
TEAM_ROUTES = [r for r in ROUTES if r.name not in NOT_TEAM_URLS]


def test_every_url_has_a_name_and_only_one_pattern():
    names = [r.name for r in ROUTES]
    assert len(names) == len(set(names)), "two patterns share a name"
    assert all(":" in r.name or r.name in NOT_TEAM_URLS for r in ROUTES), [
        r.name for r in ROUTES if ":" not in r.name and r.name not in NOT_TEAM_URLS
    ]


# ---------------------------------------------------------------- the other team's objects


@dataclass
class Theirs:
    """One object of each kind, all in the team the outsider is not in."""

    team: Team
    incident: Incident
    objects: dict[str, Any]


@pytest.fixture
def theirs(team, owner) -> Theirs:
    incident = incident_create(team=team, title="Their hang at step 900", actor=owner, job_id="77")
    inv = investigation_services
    chain = inv.why_chain_create(
        incident=incident,
        actor=owner,
        title="Throughput dropped",
        levels=[{"why": "Why slow?", "answer": "A bad link", "evidence": []}],
    )
    token, _ = account_services.api_token_create(
        team=team, name="their epilog", scope=ApiToken.Scope.WRITE, actor=owner
    )
    objects = {
        "hypothesis": inv.hypothesis_create(incident=incident, actor=owner, title="NIC flaps"),
        "chain": chain,
        "step": chain.steps.get(),
        "factor": inv.contributing_factor_add(incident=incident, actor=owner, text="no alert"),
        "fix": inv.fix_create(incident=incident, actor=owner, kind="immediate", title="reroute"),
        "action": inv.action_item_create(incident=incident, actor=owner, text="add a watchdog"),
        "artifact": Artifact.objects.create(
            incident=incident, original_name="rank0.log", display_name="rank0.log"
        ),
        "postmortem": postmortem_services.postmortem_draft_create(incident=incident, actor=owner),
        "token": token,
    }
    return Theirs(team=team, incident=incident, objects=objects)


# How each URL keyword is filled: (namespace or "" for any, keyword) → the object's value.
# A keyword missing here fails the test: say which kind of object it names.
KWARGS: dict[tuple[str, str], Callable[[Theirs], Any]] = {
    ("postmortems", "code"): lambda t: t.objects["postmortem"].code,
    ("accounts", "code"): lambda t: t.objects["token"].code,
    ("accounts", "team_code"): lambda t: t.team.code,
    ("", "code"): lambda t: t.incident.code,
    ("", "hcode"): lambda t: t.objects["hypothesis"].code,
    ("", "wcode"): lambda t: t.objects["chain"].code,
    ("", "step_id"): lambda t: t.objects["step"].pk,
    ("", "factor_id"): lambda t: t.objects["factor"].pk,
    ("", "fcode"): lambda t: t.objects["fix"].code,
    ("", "acode"): lambda t: t.objects["action"].code,
    ("", "artifact_code"): lambda t: t.objects["artifact"].code,
    ("", "kind"): lambda t: "hypotheses",
    ("", "pid"): lambda t: "hp1",
}
# Keywords that are not objects: the same value for "theirs" and "none".
NOT_OBJECTS = {"kind", "pid"}


def _fill(route: Route, theirs: Theirs | None) -> dict[str, Any]:
    """The URL's keywords with their objects, or (``None``) with objects that do not exist."""
    out = {}
    for kw in route.kwargs:
        get = KWARGS.get((route.namespace, kw)) or KWARGS.get(("", kw))
        if get is None:
            pytest.fail(
                f"{route.name} ({route.route}) has the keyword {kw!r}, which this test does "
                "not know: add an object of that kind to `theirs` and KWARGS."
            )
        if theirs is not None or kw in NOT_OBJECTS:
            out[kw] = get(theirs) if theirs is not None else get(None)  # type: ignore[arg-type]
        else:
            out[kw] = 999_999_999 if kw.endswith("_id") else "nonexistent0"
    return out


# ---------------------------------------------------------------- the database


def _our_models() -> list[type[models.Model]]:
    return [m for m in django_apps.get_models() if m.__module__.startswith("apps.")]


def _db_fingerprint() -> str:
    """Every row of every model of ours (a token's last-use time is the request's own)."""
    digest = hashlib.sha256()
    for model in sorted(_our_models(), key=lambda m: m._meta.label):
        fields = [f.attname for f in model._meta.concrete_fields if "last_used" not in f.name]
        for row in model.objects.order_by("pk").values_list(*fields):
            digest.update(f"{model._meta.label}{row!r}".encode())
    return digest.hexdigest()


# ---------------------------------------------------------------- asking


@pytest.fixture
def outsider_token(outsider, other_team) -> str:
    _, raw = account_services.api_token_create(
        team=other_team, name="outsider's", scope=ApiToken.Scope.WRITE, actor=outsider
    )
    return raw


def _clients(route: Route, outsider_client: Client, token: str) -> list[tuple[str, Client]]:
    clients = [("session", outsider_client)]
    if route.is_api:
        token_client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
        clients.append(("token", token_client))
    return clients


def _ask(client: Client, method: str, url: str, route: Route) -> Any:
    if method == "get":
        return client.get(url)
    if route.is_api:
        return client.post(url, json.dumps(PAYLOAD), content_type="application/json")
    return client.post(url, PAYLOAD)


def _allowed(route: Route) -> set[int]:
    return {403, 404, 405} if route.is_api else {404, 405}


OBJECT_ROUTES = [r for r in TEAM_ROUTES if r.kwargs]
PLAIN_ROUTES = [r for r in TEAM_ROUTES if not r.kwargs]


@pytest.mark.parametrize("route", OBJECT_ROUTES, ids=[r.name for r in OBJECT_ROUTES])
def test_an_outsider_cannot_tell_our_objects_exist_nor_change_them(
    route, theirs, outsider_client, outsider_token
):
    url = reverse(route.name, kwargs=_fill(route, theirs))
    missing_url = reverse(route.name, kwargs=_fill(route, None))
    before = _db_fingerprint()
    for how, client in _clients(route, outsider_client, outsider_token):
        for method in ("get", "post"):
            response = _ask(client, method, url, route)
            missing = _ask(client, method, missing_url, route)
            where = f"{method.upper()} {url} ({how})"
            assert response.status_code in _allowed(route), (where, response.status_code)
            # The same answer as for an object that does not exist: nothing to learn.
            assert response.status_code == missing.status_code, (where, missing.status_code)
            if route.is_api:
                assert response["Content-Type"].startswith("application/json"), where
                assert response.json(), where
            body = response.content.decode(errors="replace")
            assert theirs.incident.title not in body, where
    assert _db_fingerprint() == before, f"{route.name}: an outsider's request changed the database"


# The keyword naming what a URL's records live in (an incident; a team for its tokens).
CONTAINERS = {"accounts": "team_code"}


def _container(route: Route) -> str:
    return CONTAINERS.get(route.namespace, "code")


NESTED_ROUTES = [
    r
    for r in OBJECT_ROUTES
    if _container(r) in r.kwargs
    and any(kw not in NOT_OBJECTS and kw != _container(r) for kw in r.kwargs)
]


@pytest.mark.parametrize("route", NESTED_ROUTES, ids=[r.name for r in NESTED_ROUTES])
def test_their_records_under_what_the_outsider_may_open_are_not_found_either(
    route, theirs, outsider, other_team, outsider_client
):
    """Their record's code, put under the outsider's own incident (or team), is not found:
    records are looked up inside what the URL names, not by their code alone."""
    own = incident_create(team=other_team, title="Own incident", actor=outsider)
    mine = other_team.code if _container(route) == "team_code" else own.code
    url = reverse(route.name, kwargs={**_fill(route, theirs), _container(route): mine})
    before = _db_fingerprint()
    for method in ("get", "post"):
        response = _ask(outsider_client, method, url, route)
        assert response.status_code in _allowed(route), (method, url, response.status_code)
    assert _db_fingerprint() == before, f"{route.name}: the request changed the database"


@pytest.mark.parametrize("route", PLAIN_ROUTES, ids=[r.name for r in PLAIN_ROUTES])
def test_lists_and_forms_show_an_outsider_nothing_of_ours_and_an_empty_post_changes_nothing(
    route, theirs, outsider_client, outsider_token
):
    url = reverse(route.name)
    before = _db_fingerprint()
    secrets = [theirs.incident.code, theirs.incident.title, theirs.team.name, theirs.team.code]
    for how, client in _clients(route, outsider_client, outsider_token):
        response = client.get(url)
        body = response.content.decode(errors="replace")
        for secret in secrets:
            assert secret not in body, f"GET {url} ({how}) shows {secret!r}"
        if route.is_api:
            client.post(url, "{}", content_type="application/json")
        else:
            client.post(url, {})
    assert _db_fingerprint() == before, f"{route.name}: an empty POST changed the database"


def test_every_keyword_of_every_url_is_known():
    """Checked without a database: a new URL keyword fails here first, with its name."""
    unknown = sorted(
        {
            f"{r.name}:{kw}"
            for r in TEAM_ROUTES
            for kw in r.kwargs
            if (r.namespace, kw) not in KWARGS and ("", kw) not in KWARGS
        }
    )
    assert not unknown, f"URL keywords with no object kind in this test: {unknown}"
    assert len(TEAM_ROUTES) >= 50, [r.name for r in TEAM_ROUTES]  # the walk found the apps
