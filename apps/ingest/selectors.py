"""Reads for artifacts. Access checks live here: outsiders get 404, never 403."""

from __future__ import annotations

import gzip
import io
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet
from django.http import Http404
from django.urls import reverse

import rankscope as engine
from apps.incidents.models import Incident
from apps.incidents.selectors import incident_get_for_user
from apps.ingest import lineindex, storage
from apps.ingest.models import Artifact, ParseStatus, RankDigest


def artifact_list_for_incident(*, incident: Incident) -> QuerySet[Artifact]:
    return Artifact.objects.filter(incident=incident).order_by("display_name", "pk")


def artifact_get_for_user(
    *, user: AbstractBaseUser | AnonymousUser, incident_code: str, artifact_code: str
) -> Artifact:
    incident = incident_get_for_user(user=user, code=incident_code)
    artifact = (
        Artifact.objects.filter(incident=incident, code=artifact_code)
        .select_related("incident")
        .first()
    )
    if artifact is None:
        raise Http404("No such artifact")
    return artifact


def artifact_parse_result(*, artifact: Artifact) -> engine.ParseResult | None:
    """The stored ParseResult (with its metrics table), or None when not parsed yet."""
    if not artifact.parsed_key:
        return None
    with storage.open_stream(artifact.parsed_key) as raw, gzip.GzipFile(fileobj=raw) as fp:
        data = json.load(fp)
    return engine.ParseResult.from_json(data, metrics=artifact_metrics(artifact=artifact))


def artifact_metrics(*, artifact: Artifact) -> engine.MetricsTable | None:
    if not artifact.metrics_key:
        return None
    with storage.open_stream(artifact.metrics_key) as fp:
        return engine.MetricsTable.read(fp)


def artifact_by_display_name(*, incident: Incident, name: str) -> Artifact | None:
    """The stored artifact with this display name (the newest, if several)."""
    return (
        Artifact.objects.filter(incident=incident, display_name=name)
        .exclude(parse_status=ParseStatus.REJECTED)
        .order_by("-pk")
        .first()
    )


def incident_parse_counts(*, incident: Incident) -> dict[str, int]:
    counts = Counter(
        Artifact.objects.filter(incident=incident).values_list("parse_status", flat=True)
    )
    return {s.value: counts.get(s.value, 0) for s in ParseStatus}


def rank_digests_for_incident(*, incident: Incident) -> QuerySet[RankDigest]:
    return RankDigest.objects.filter(incident=incident).select_related("artifact")


def _name_map(incident: Incident) -> dict[str, str]:
    # One query per incident per request, however many evidence links a page shows.
    cached = getattr(incident, "_ingest_name_map", None)
    if cached is None:
        cached = dict(
            Artifact.objects.filter(incident=incident)
            .exclude(parse_status=ParseStatus.REJECTED)
            .order_by("pk")
            .values_list("display_name", "code")
        )
        incident._ingest_name_map = cached  # type: ignore[attr-defined]
    return cached


def evidence_artifact_code(incident: Incident, file: str) -> str | None:
    """The artifact a reference names: its display name (``job.tar.gz/logs/rank_5.log``),
    or a unique tail of it (``logs/rank_5.log``, ``rank_5.log``), as people write them."""
    names = _name_map(incident)
    file = (file or "").strip().lstrip("/")
    if not file:
        return None
    code = names.get(file)
    if code is not None:
        return code
    tails = [c for name, c in names.items() if name.endswith("/" + file)]
    return tails[0] if len(tails) == 1 else None


def evidence_url(incident: Incident, file: str, line: int | str | None = None) -> str:
    """URL of the evidence viewer at ``file`` (a display name) and ``line``; "" if unknown."""
    code = evidence_artifact_code(incident, file)
    if code is None:
        return ""
    url = reverse("ingest:view", args=[incident.code, code])
    try:
        n = int(line) if line is not None and line != "" else None
    except (TypeError, ValueError):
        n = None
    return f"{url}?line={n}#L{n}" if n and n > 0 else url


# --- the evidence viewer ------------------------------------------------------------

MAX_LINE_CHARS = 4000


@dataclass(slots=True)
class ViewLine:
    number: int
    text: str
    cut: bool
    highlight: bool


@dataclass(slots=True)
class ViewPage:
    lines: list[ViewLine]
    start: int
    end: int  # last line shown
    has_more: bool
    total_lines: int | None


# The rank prefixes launchers put on a line: torchrun/PyTorch "[rank5]:", "[default5]:",
# torchrun --tee "5: " / "[5]:", srun --label "5: ".
_RANK_PREFIX = re.compile(rb"^\s*\[(?:rank|default)?(\d{1,6})\]:|^\s*(\d{1,6}): ")
# A rank filter reads at most this many lines per page (a rank absent from a 2 GiB file
# must not mean reading all of it for one page): the pager goes on from there.
RANK_SCAN_LINES = 200_000


def line_rank(raw: bytes) -> int | None:
    """The rank a line's launcher prefix names, or None (continuation lines have none)."""
    m = _RANK_PREFIX.match(raw)
    if m is None:
        return None
    return int(m.group(1) or m.group(2))


def artifact_lines(
    *,
    artifact: Artifact,
    start: int,
    count: int,
    highlight: int | None = None,
    rank: int | None = None,
) -> ViewPage:
    """Lines ``start``… (1-based) of the stored file, decoded with replacement.

    Reads only the bytes of the lines it shows, on S3 (ranged GETs) and on the
    filesystem alike: the line index (``lineindex``) gives where a line at most
    ``lineindex.EVERY - 1`` lines before ``start`` begins, and the file is read from
    there in growing ranges until the page is full. An artifact parsed before that
    index existed falls back to the parse result's sparse index. ``rank``: only that
    rank's lines (by launcher prefix; unprefixed lines follow the rank above them),
    reading at most ``RANK_SCAN_LINES`` lines for one page.
    """
    start = max(1, start)
    line_no, offset = _seek_point(artifact, start)
    out: list[ViewLine] = []
    has_more = False
    fp = io.BufferedReader(
        storage.RangeReader(
            artifact.storage_key,
            start=offset,
            length=artifact.size or None,
            chunk=16 << 10,
            max_chunk=1 << 20,
        ),
        buffer_size=16 << 10,
    )
    with fp:
        continued = False  # the piece before was a long line's first 1 MiB
        current: int | None = None  # the rank of the last prefixed line
        scanned = 0
        for raw in _lines(fp):
            if rank is None and line_no >= start + count:
                has_more = True
                break
            if rank is not None and (len(out) >= count or scanned >= RANK_SCAN_LINES):
                has_more = True
                break
            shown = line_no >= start and not continued
            if shown and rank is not None:
                scanned += 1
                named = line_rank(raw)
                current = named if named is not None else current
                shown = current == rank
            if shown:
                text = raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
                cut = len(text) > MAX_LINE_CHARS or len(raw) >= 1 << 20
                out.append(ViewLine(line_no, text[:MAX_LINE_CHARS], cut, line_no == highlight))
            continued = len(raw) >= 1 << 20 and not raw.endswith(b"\n")
            if not continued:
                line_no += 1
    end = out[-1].number if out else (line_no - 1 if rank is not None else start - 1)
    return ViewPage(
        lines=out, start=start, end=end, has_more=has_more, total_lines=artifact.line_count
    )


def _seek_point(artifact: Artifact, start: int) -> tuple[int, int]:
    """``(line_no, byte_offset)`` of a known line start at or before ``start``."""
    if artifact.kind == "metrics":
        return 1, 0
    try:
        point = lineindex.lookup(artifact.storage_key, start)
    except storage.ERRORS:
        point = None
    if point is not None:
        return point
    line_no, offset = 1, 0
    if artifact.parsed_key:
        try:
            result = _parse_json(artifact)
        except (*storage.ERRORS, ValueError):
            result = {}
        for ln, off in result.get("line_index", []):
            if line_no <= ln <= start:
                line_no, offset = int(ln), int(off)
    return line_no, offset


def _parse_json(artifact: Artifact) -> dict:
    with storage.open_stream(artifact.parsed_key) as raw, gzip.GzipFile(fileobj=raw) as fp:
        return json.load(fp)


def _lines(fp) -> Iterator[bytes]:
    # Bounded: a "line" longer than 1 MiB is returned in pieces rather than held whole.
    while True:
        line = fp.readline(1 << 20)
        if not line:
            return
        yield line
