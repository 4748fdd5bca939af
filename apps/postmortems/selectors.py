"""Reads for post-mortems. They own the access check: outsiders get 404, never 403."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection
from django.db.models import F, Q, QuerySet
from django.http import Http404

from apps.incidents.models import Incident
from apps.lib.filtering import filter_given
from apps.postmortems import similarity
from apps.postmortems.models import IncidentSignature, PostMortem

SIMILAR_LIMIT = 10
SIMILAR_MIN_SCORE = 0.2
SIMILAR_SCAN = 2_000  # signatures compared per incident, newest first


def postmortem_list_for_user(
    *,
    user: AbstractBaseUser | AnonymousUser,
    status: str = "",
    category: str = "",
    cluster: str = "",
    date_from: dt.date | None = None,
    date_to: dt.date | None = None,
    cost_min: Decimal | None = None,
    cost_max: Decimal | None = None,
    q: str = "",
) -> QuerySet[PostMortem]:
    """Post-mortems of the user's teams, filtered; with ``q``, best matches first."""
    if not user.is_authenticated:
        return PostMortem.objects.none()
    qs = PostMortem.objects.filter(team__memberships__user=user).select_related(
        "incident", "owner", "team"
    )
    qs = filter_given(
        qs,
        status=status,
        category__iexact=category,
        cluster=cluster,
        incident__created_at__date__gte=date_from,
        incident__created_at__date__lte=date_to,
        cost_usd__gte=cost_min,
        cost_usd__lte=cost_max,
    )
    qs = qs.distinct()
    q = q.strip()
    if q:
        if connection.vendor == "postgresql":
            query = SearchQuery(q, search_type="websearch", config="english")
            return (
                qs.filter(search_vector=query)
                .annotate(rank=SearchRank(F("search_vector"), query))
                .order_by("-rank", "-created_at")
            )
        # Embedded mode (SQLite): no full-text engine, plain substring match per word.
        for word in q.split()[:8]:
            qs = qs.filter(
                Q(title__icontains=word)
                | Q(summary__icontains=word)
                | Q(root_cause__icontains=word)
                | Q(search_text__icontains=word)
            )
    return qs.order_by("-created_at")


def postmortem_get_for_user(*, user: AbstractBaseUser | AnonymousUser, code: str) -> PostMortem:
    """The post-mortem, or 404 for anyone outside its team."""
    if not user.is_authenticated:
        raise Http404("No such post-mortem")
    pm = (
        PostMortem.objects.filter(code=code, team__memberships__user=user)
        .select_related("incident", "incident__team", "team", "owner")
        .first()
    )
    if pm is None:
        raise Http404("No such post-mortem")
    return pm


def postmortem_latest_for_incident(*, incident: Incident) -> PostMortem | None:
    return (
        PostMortem.objects.filter(incident=incident)
        .select_related("owner")
        .order_by("-created_at", "-pk")
        .first()
    )


def postmortem_categories_for_user(*, user: AbstractBaseUser | AnonymousUser) -> list[str]:
    qs = postmortem_list_for_user(user=user).exclude(category="")
    return sorted(set(qs.values_list("category", flat=True)))


def postmortem_clusters_for_user(*, user: AbstractBaseUser | AnonymousUser) -> list[str]:
    qs = postmortem_list_for_user(user=user).exclude(cluster="")
    return sorted(set(qs.values_list("cluster", flat=True)))


@dataclass(frozen=True)
class SimilarMatch:
    code: str
    title: str
    created_at: dt.datetime
    score: float
    reasons: list[str]


@dataclass(frozen=True)
class SimilarReport:
    signature: similarity.Signature | None
    matches: list[SimilarMatch] = field(default_factory=list)
    recurring: list[str] = field(default_factory=list)


def _signature(row: IncidentSignature) -> similarity.Signature:
    return similarity.signature_from_json(
        {
            "category": row.category,
            "shape": row.shape,
            "error_kinds": row.error_kinds,
            "collective_ops": row.collective_ops,
            "xid_codes": row.xid_codes,
            "hosts": row.hosts,
        }
    )


def similar_incidents(*, incident: Incident, limit: int = SIMILAR_LIMIT) -> SimilarReport:
    """Past incidents of the same team ranked by signature similarity, with the reasons,
    and the hosts / error kinds / Xids that recur across this and other incidents."""
    own = IncidentSignature.objects.filter(incident=incident).first()
    if own is None:
        return SimilarReport(signature=None)
    mine = _signature(own)
    if mine.is_empty():
        return SimilarReport(signature=mine)
    others = (
        IncidentSignature.objects.filter(team_id=incident.team_id)
        .exclude(incident=incident)
        .select_related("incident")
        .order_by("-incident__created_at")[:SIMILAR_SCAN]
    )
    matches: list[SimilarMatch] = []
    host_hits: Counter[str] = Counter()
    kind_hits: Counter[str] = Counter()
    xid_hits: Counter[str] = Counter()
    for row in others:
        theirs = _signature(row)
        host_hits.update(mine.hosts & theirs.hosts)
        kind_hits.update(mine.error_kinds & theirs.error_kinds)
        xid_hits.update(mine.xid_codes & theirs.xid_codes)
        match = similarity.signature_similarity(mine, theirs)
        if match.score >= SIMILAR_MIN_SCORE:
            matches.append(
                SimilarMatch(
                    code=row.incident.code,
                    title=row.incident.title,
                    created_at=row.incident.created_at,
                    score=match.score,
                    reasons=match.reasons,
                )
            )
    matches.sort(key=lambda m: (-m.score, -m.created_at.timestamp()))
    recurring = [
        f"Host {host} also appears in {n} other incident{'s' if n > 1 else ''}"
        for host, n in host_hits.most_common()
    ]
    recurring += [
        f"Xid {xid} also seen in {n} other incident{'s' if n > 1 else ''}"
        for xid, n in xid_hits.most_common()
    ]
    recurring += [
        f"Error {kind} also seen in {n} other incidents"
        for kind, n in kind_hits.most_common()
        if n >= 2
    ]
    return SimilarReport(signature=mine, matches=matches[:limit], recurring=recurring)
