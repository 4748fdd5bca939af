"""Hardware: Xid codes with their meaning and first action, nvidia-smi readings, repeat offenders.

- Xid (kernel log ``NVRM: Xid (PCI:…): N, …``): each code maps to what it means
  and the first action (``reset`` the GPU, ``drain`` the node for diagnostics,
  ``replace`` the part, or ``app`` — fix the application), per NVIDIA's Xid catalogue.
- nvidia-smi uploads: a GPU nvidia-smi cannot reach (``Unable to determine the
  device handle``, ``ERR!`` in the table), uncorrectable ECC, SRAM threshold
  exceeded, retired pages / remapped rows pending or failed, the driver's
  reset/drain recommendation, temperature at/over the slowdown limit (or > 85 °C,
  or within 2 °C of T.Limit's slowdown margin), clocks throttled (HW slowdown /
  thermal / power brake), SM clock far below max under load. Power at its cap
  is a note (a busy GPU sits there), not a problem.
- Repeat offenders: hosts of this job that appear in ``Options.history_hosts``
  (host → number of this team's past incidents naming it).
"""

from __future__ import annotations

from typing import Any

from .._lazy import lazy_compile
from ..model import Event
from . import Context, register_analyzer

# code → (meaning, first action)
XID: dict[int, tuple[str, str]] = {
    13: ("graphics engine exception (often an application bug or bad memory access)", "app"),
    31: ("GPU memory page fault (invalid address; usually the application)", "app"),
    32: ("invalid or corrupted push buffer stream (PCIe / driver)", "reset"),
    38: ("driver firmware error", "reset"),
    43: ("GPU stopped processing (a user application fault)", "app"),
    45: ("preemptive cleanup after a previous error (follow-on of another Xid)", "app"),
    48: ("double-bit ECC error (uncorrectable memory error)", "drain"),
    54: ("auxiliary power not connected / power fault", "replace"),
    56: ("display engine error", "reset"),
    57: ("error programming video memory interface", "drain"),
    61: ("internal microcontroller breakpoint/warning", "reset"),
    62: ("internal microcontroller halt", "reset"),
    63: ("ECC page retirement or row remapping recorded", "drain"),
    64: ("ECC page retirement or row remapping failure", "replace"),
    68: ("video processor exception", "reset"),
    69: ("graphics engine class error", "reset"),
    74: ("NVLink error", "drain"),
    79: ("GPU has fallen off the bus", "drain"),
    92: ("high single-bit ECC error rate", "drain"),
    94: ("contained ECC error (application affected, GPU usable)", "reset"),
    95: ("uncontained ECC error (all applications on the GPU affected)", "drain"),
    109: ("context switch timeout", "app"),
    119: ("GSP RPC timeout (firmware not responding)", "reset"),
    120: ("GSP error", "reset"),
    121: ("C2C link error", "drain"),
    122: ("SPI PMU RPC read failure", "drain"),
    123: ("SPI PMU RPC write failure", "drain"),
    140: ("ECC unrecovered error", "drain"),
    143: ("GPU initialisation failure", "replace"),
    145: ("NVLink / C2C recovery event", "drain"),
    154: ("GPU recovery action required (reset or node reboot)", "reset"),
}
ACTION_TEXT = {
    "app": "look at the application first (the GPU is likely fine); drain only if it repeats on the same GPU",
    "reset": "reset the GPU (nvidia-smi -r or reboot the node) before the next job; drain if it recurs",
    "drain": "drain the node and run diagnostics (dcgmi diag -r 3); replace the GPU if it fails",
    "replace": "drain the node and open a hardware ticket to replace the part",
}
HOT_C = 85
_PCI = lazy_compile(
    r"(?:PCI:)?(?P<dom>[0-9A-Fa-f]{4,8}):(?P<bus>[0-9A-Fa-f]{2}):(?P<dev>[0-9A-Fa-f]{2})"
)


def pci_key(bus: Any) -> str | None:
    """Xid's ``PCI:0000:3b:00`` and nvidia-smi's ``00000000:3B:00.0`` → ``0:3b:00``."""
    m = _PCI.search(bus) if isinstance(bus, str) else None
    if not m:
        return None
    return f"{int(m.group('dom'), 16):x}:{m.group('bus').lower()}:{m.group('dev').lower()}"


def _reading_event(e: Event, name: str) -> Event:
    line, text = (e.fields.get("lines") or {}).get(name, [e.line, e.text])
    return Event(
        kind="gpu_reading",
        line=line,
        text=text,
        host=e.host,
        file=e.file,
        fields={"gpu": e.fields.get("gpu"), "reading": name},
    )


class HardwareAnalyzer:
    name = "hardware"
    phase = "isolation"
    order = 61
    reads = ("events", "doc.job")
    writes = ("doc.hardware", "findings")

    def run(self, ctx: Context) -> None:
        out: dict[str, Any] = {"xid": [], "gpus": [], "repeat_offenders": []}
        self._xid(ctx, out)
        self._smi(ctx, out)
        self._history(ctx, out)
        if out["xid"] or out["gpus"] or out["repeat_offenders"]:
            ctx.doc["hardware"] = out

    def _xid(self, ctx: Context, out: dict[str, Any]) -> None:
        groups: dict[tuple[str | None, str, int], list[Event]] = {}
        for e in ctx.by_kind.get("xid", []):
            code = e.fields.get("xid")
            if code is None:
                continue
            groups.setdefault((e.host, e.fields.get("pci", ""), int(code)), []).append(e)
        # "fallen off the bus" printed without an Xid (the multi-line NVRM form) is Xid 79
        seen_79 = {ev.host or ev.file for (_, _, c), evs in groups.items() if c == 79 for ev in evs}
        for e in ctx.by_kind.get("gpu_off_bus", []):
            if (e.host or e.file) not in seen_79:
                groups.setdefault((e.host, e.fields.get("pci", ""), 79), []).append(e)
        # PCI bus → GPU index from nvidia-smi uploads of the same host
        index: dict[tuple[str | None, str], Any] = {}
        for e in ctx.by_kind.get("gpu_reading", []):
            k = pci_key((e.fields.get("readings") or {}).get("bus"))
            if k:
                index[(e.host, k)] = e.fields.get("gpu")
        for (host, pci, code), evs in sorted(
            groups.items(), key=lambda kv: (kv[0][0] or "", kv[0][1], kv[0][2])
        ):
            meaning, action = XID.get(
                code, ("unlisted Xid code (see NVIDIA's Xid catalogue)", "drain")
            )
            gpu = index.get((host, pci_key(pci) or ""))
            row = {
                "host": host,
                "pci": pci,
                "gpu": gpu,
                "xid": code,
                "meaning": meaning,
                "action": action,
                "count": len(evs),
                "first": {"file": evs[0].file, "line": evs[0].line},
            }
            out["xid"].append(row)
            conf = 0.9 if action in ("drain", "replace") else 0.6
            ctx.add_finding(
                phase="isolation",
                kind="xid_decoded",
                title=f"Xid {code} on {host or 'a node'} GPU "
                + (f"{gpu} ({pci})" if gpu is not None else (pci or "?"))
                + f": {meaning} → {action}",
                detail=ACTION_TEXT[action] + f". Seen {len(evs)} time(s).",
                confidence=conf,
                hosts=[host] if host else [],
                evidence_events=evs[:3],
                xid=code,
                action=action,
                category="HARDWARE" if action != "app" else "SOFTWARE",
            )

    def _smi(self, ctx: Context, out: dict[str, Any]) -> None:
        """Each nvidia-smi GPU reading checked by ``_SMI_CHECKS``: a finding with the
        strongest action when any reading is wrong."""
        for e in ctx.by_kind.get("gpu_reading", []):
            r = e.fields.get("readings") or {}
            problems = [p for check in _SMI_CHECKS for p in check(r)]
            out["gpus"].append(
                {
                    "host": e.host,
                    "gpu": e.fields.get("gpu"),
                    "file": e.file,
                    "readings": {k: v for k, v in r.items() if not isinstance(v, dict)},
                    "problems": [m for _, m, _ in problems],
                    "notes": _power_notes(r),
                }
            )
            if not problems:
                continue
            action = (
                "replace"
                if any(a == "replace" for *_, a in problems)
                else ("drain" if any(a == "drain" for *_, a in problems) else "reset")
            )
            ctx.add_finding(
                phase="isolation",
                kind="gpu_health",
                title=f"{e.host or e.file} GPU {e.fields.get('gpu')}: "
                + "; ".join(m for _, m, _ in problems[:3])
                + f" → {action}",
                detail=ACTION_TEXT.get(action, ""),
                confidence=0.8 if action != "app" else 0.5,
                hosts=[e.host] if e.host else [],
                evidence_events=[_reading_event(e, n) for n, _, _ in problems[:4]],
                action=action,
                category="HARDWARE",
            )

    def _history(self, ctx: Context, out: dict[str, Any]) -> None:
        hist = ctx.options.history_hosts or {}
        if not hist:
            return
        job_hosts = set(ctx.doc.get("job", {}).get("hosts", {})) | {
            e.host for e in ctx.events if e.host
        }
        # the verdict names its culprits later (order 90): the findings so far are the suspects
        suspects: set[str] = set()
        for f in ctx.findings:
            suspects.update(f.get("hosts", []))
        for host in sorted(job_hosts):
            n = int(hist.get(host, 0) or 0)
            if n <= 0:
                continue
            evs = [e for e in ctx.events if e.host == host]
            evs.sort(key=lambda e: (e.level != "E", e.line))
            out["repeat_offenders"].append(
                {"host": host, "past_incidents": n, "in_this_incident": host in suspects}
            )
            if not evs:
                continue
            ctx.add_finding(
                phase="isolation",
                kind="repeat_offender",
                title=f"{host} appears in {n} past incident(s) of this team"
                + (" and is a suspect here" if host in suspects else ""),
                detail="A host that keeps coming back is a hardware suspect even when this incident's evidence is indirect; "
                "run diagnostics before returning it to the pool.",
                confidence=min(0.9, 0.4 + 0.15 * n + (0.2 if host in suspects else 0)),
                hosts=[host],
                evidence_events=evs[:2],
                past_incidents=n,
            )


# (reading, message, action) of one wrong nvidia-smi reading
_Problem = tuple[str, str, str]
_YES = ("yes", "1", "true")


def _memory_problems(r: dict[str, Any]) -> list[_Problem]:
    """Uncorrectable memory errors, retirement and remapping, a GPU off the bus."""
    problems: list[_Problem] = []
    for name in (
        "ecc_uncorrected_volatile",
        "ecc_uncorrected_aggregate",
        "retired_dbe",
        "remapped_uncorrectable",
    ):
        v = r.get(name)
        if isinstance(v, int | float) and v > 0:
            problems.append((name, f"{name.replace('_', ' ')} = {v}", "drain"))
    for name in ("pending_retirement", "remap_pending"):
        if str(r.get(name, "")).lower() in _YES:
            problems.append(
                (name, f"{name.replace('_', ' ')}: a reset is needed to retire memory", "reset")
            )
    if str(r.get("remap_failure", "")).lower() in _YES:
        problems.append(("remap_failure", "row remapping failed", "replace"))
    if r.get("lost"):
        problems.append(("lost", f"nvidia-smi cannot reach the GPU ({r['lost']})", "drain"))
    return problems


def _driver_problems(r: dict[str, Any]) -> list[_Problem]:
    """What the driver itself says: SRAM errors over threshold, drain and reset."""
    problems: list[_Problem] = []
    if str(r.get("sram_threshold_exceeded", "")).lower() == "yes":
        problems.append(
            ("sram_threshold_exceeded", "SRAM uncorrectable errors over threshold", "replace")
        )
    if str(r.get("drain_and_reset", "")).lower() == "yes":
        problems.append(("drain_and_reset", "driver recommends drain and reset", "drain"))
    elif str(r.get("reset_required", "")).lower() == "yes":
        problems.append(("reset_required", "driver says a GPU reset is required", "reset"))
    return problems


def _thermal_problems(r: dict[str, Any]) -> list[_Problem]:
    problems: list[_Problem] = []
    margin, slow_at = r.get("t_limit_margin_c"), r.get("slowdown_t_limit_c")
    if (
        isinstance(margin, int | float)
        and margin <= (slow_at if isinstance(slow_at, int | float) else 0) + 2
    ):
        problems.append(("t_limit_margin_c", f"{margin} °C from the thermal limit", "drain"))
    temp = r.get("temp_c")
    limit = r.get("slowdown_temp_c") if isinstance(r.get("slowdown_temp_c"), int | float) else None
    if isinstance(temp, int | float) and (temp >= (limit or 999) - 2 or temp > HOT_C):
        problems.append(
            (
                "temp_c",
                f"temperature {temp} °C" + (f" (slowdown at {limit} °C)" if limit else ""),
                "drain",
            )
        )
    return problems


def _clock_problems(r: dict[str, Any]) -> list[_Problem]:
    """Clocks throttled by hardware, heat or power brake; an SM clock low under load."""
    problems: list[_Problem] = [
        (k, f"clocks throttled: {k[9:].replace('_', ' ')}", "drain")
        for k, v in r.items()
        if k.startswith("throttle_")
        and v == "Active"
        and any(t in k for t in ("hw", "thermal", "power_brake", "slowdown"))
    ]
    cap = r.get("power_limit_w")
    sm, smax = r.get("sm_clock_mhz"), r.get("sm_clock_max_mhz")
    # several samples: judge the clock by the power of its own sample
    load_pw = r.get("sm_clock_power_w") if r.get("samples") else r.get("power_w")
    if (
        isinstance(sm, int | float)
        and isinstance(smax, int | float)
        and smax
        and sm < 0.7 * smax
        and (load_pw or 0) > 0.5 * (cap or 1e9)
    ):
        problems.append(("sm_clock_mhz", f"SM clock {sm} MHz under load, max {smax}", "drain"))
    return problems


# the checks of one GPU's readings, in the order their problems are listed
_SMI_CHECKS = (_memory_problems, _driver_problems, _thermal_problems, _clock_problems)


def _power_notes(r: dict[str, Any]) -> list[str]:
    pw, cap = r.get("power_w"), r.get("power_limit_w")
    if (
        isinstance(pw, int | float)
        and isinstance(cap, int | float)
        and cap > 0
        and pw >= 0.98 * cap
    ):
        # a busy GPU normally runs at its power cap: context, not a fault by itself
        return [f"power {pw} W at its cap {cap} W"]
    return []


register_analyzer(HardwareAnalyzer())
