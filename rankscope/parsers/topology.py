"""Topology maps people upload: which switch (and rack) each host hangs off.

Accepted formats (documented in docs/analysis.md, "Isolation and root cause"):
- CSV/TSV with a header naming ``host`` (or ``hostname``/``node``) and
  ``switch`` (or ``leaf``/``tor``/``spine``), optionally ``rack``;
  without a header, ``host,switch[,rack]`` rows;
- JSON: ``{"node-01": "switch-04", …}``, ``{"node-01": {"switch": …, "rack": …}}``
  or ``[{"host": …, "switch": …, "rack": …}, …]`` (one object per line also works);
- ``nvidia-smi topo -m`` matrices are recognised and kept as intra-node facts only.

Each mapping becomes a ``topology_entry`` event whose line is the row's (or the
JSON key's) line. ``facts["topology"] = {"host": {"switch": …, "rack": …, "line": n}}``.
"""

from __future__ import annotations

import re
from typing import Any, BinaryIO

from .._lazy import lazy_compile
from ..detect import Head, Recognizer
from ..model import Event, ParseResult
from . import ParseError, Progress, register_parser
from ._json_rows import json_document_or_lines
from ._lines import clip, iter_lines

_HOST_KEYS = ("host", "hostname", "node", "nodename", "node_name", "server")
_SWITCH_KEYS = ("switch", "leaf", "tor", "leaf_switch", "spine", "switch_name")
_RACK_KEYS = ("rack", "rack_id", "pod")
_JSON_PAIR = lazy_compile(r'"(?P<k>[^"]+)"\s*:')
MAX_HOSTS = 100_000


def _split(line: str) -> list[str]:
    sep = "\t" if line.count("\t") > line.count(",") else ","
    if sep == "," and "," not in line and len(line.split()) >= 2:
        return line.split()
    return [c.strip().strip('"') for c in line.split(sep)]


def _pick(d: dict[str, Any], keys: tuple[str, ...]) -> Any:
    low = {str(k).lower(): v for k, v in d.items()}
    for k in keys:
        if low.get(k) not in (None, ""):
            return low[k]
    return None


def _has_topology_header(h: Head) -> bool:
    return bool(re.match(r"^(?:host|hostname|node),(?:switch|leaf|tor)\b", h.first_line))


def _is_topology_output(h: Head) -> bool:
    return h.base.startswith(("topo", "nvidia-smi-topo", "ibstat", "ibnetdiscover")) or (
        h.has("\tGPU1\t") and "\tGPU1\t" in h.text[:4000]
    )


class TopologyParser:
    name = "topology"
    kinds = ("topology",)
    recognizers = (
        Recognizer("topology", 40, _has_topology_header),
        # by name or nvidia-smi topo's matrix: after the formats a header names
        Recognizer("topology", 70, _is_topology_output, ("\tGPU1\t",)),
    )

    def parse(self, stream: BinaryIO, result: ParseResult, progress: Progress | None) -> None:
        lines = list(_bounded(iter_lines(stream, result)))
        body = "\n".join(t for _, t in lines).strip()
        topo: dict[str, dict[str, Any]] = {}
        if body.startswith(("{", "[")):
            self._json(lines, body, topo, result)
        elif any("GPU0" in t and ("GPU1" in t or "CPU Affinity" in t) for _, t in lines[:50]):
            result.facts["gpu_topology_matrix"] = True
            result.warn("nvidia-smi topo -m matrix: intra-node links only, no host→switch map")
            return
        else:
            self._csv(lines, topo)
        if not topo:
            raise ParseError("no host→switch rows found (expected host,switch[,rack] CSV or JSON)")
        for host, d in topo.items():
            result.events.append(
                Event(
                    kind="topology_entry",
                    line=d["line"],
                    text=d["text"],
                    host=host,
                    fields={"switch": d.get("switch"), "rack": d.get("rack")},
                    file=result.name,
                )
            )
        result.hosts = sorted(topo)[:256]
        result.facts["topology"] = {
            h: {k: d.get(k) for k in ("switch", "rack", "line")} for h, d in topo.items()
        }
        result.event_counts["topology_entry"] = len(topo)

    def _csv(self, lines: list[tuple[int, str]], topo: dict[str, dict[str, Any]]) -> None:
        hi, si, ri = 0, 1, 2
        for n, (line_no, text) in enumerate(lines):
            s = text.strip()
            if not s or s.startswith("#"):
                continue
            cells = _split(s)
            low = [c.lower() for c in cells]
            if n < 5 and any(c in _HOST_KEYS for c in low):
                hi = next(i for i, c in enumerate(low) if c in _HOST_KEYS)
                si = next((i for i, c in enumerate(low) if c in _SWITCH_KEYS), 1)
                ri = next((i for i, c in enumerate(low) if c in _RACK_KEYS), -1)
                continue
            if len(cells) <= max(hi, si):
                continue
            host, switch = cells[hi], cells[si]
            if host and switch:
                topo[host] = {
                    "switch": switch,
                    "rack": cells[ri] if 0 <= ri < len(cells) and cells[ri] else None,
                    "line": line_no,
                    "text": clip(text),
                }

    def _json(
        self,
        lines: list[tuple[int, str]],
        body: str,
        topo: dict[str, dict[str, Any]],
        result: ParseResult,
    ) -> None:
        objs = json_document_or_lines(body, lines)
        # where each host is named (its first line): the quoted key or value
        first_line: dict[str, tuple[int, str]] = {}
        for line_no, t in lines:
            for m in re.finditer(r'"([^"]+)"', t):
                first_line.setdefault(m.group(1), (line_no, clip(t)))
        items: list[tuple[str, Any, Any]] = []
        if isinstance(objs, dict):
            objs = objs.get("hosts", objs) if isinstance(objs.get("hosts"), dict | list) else objs
        if isinstance(objs, dict):
            for host, v in objs.items():
                if isinstance(v, dict):
                    items.append((host, _pick(v, _SWITCH_KEYS), _pick(v, _RACK_KEYS)))
                elif isinstance(v, str | int):
                    items.append((host, str(v), None))
        elif isinstance(objs, list):
            for o in objs:
                if isinstance(o, dict) and _pick(o, _HOST_KEYS):
                    items.append(
                        (str(_pick(o, _HOST_KEYS)), _pick(o, _SWITCH_KEYS), _pick(o, _RACK_KEYS))
                    )
        for host, switch, rack in items:
            if not switch:
                continue
            line, text = first_line.get(host, (1, clip(lines[0][1]) if lines else ""))
            topo[host] = {
                "switch": str(switch),
                "rack": str(rack) if rack else None,
                "line": line,
                "text": text,
            }


def _bounded(it: Any) -> Any:
    for n, pair in enumerate(it):
        if n > MAX_HOSTS * 4:
            break
        yield pair


register_parser(TopologyParser())
