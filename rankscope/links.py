"""The link an nccl-tests run used, and the bus bandwidth that link can carry.

Rates are per GPU and per direction in GB/s (nccl-tests' ``busbw`` is comparable with
the per-direction rate of the slowest link each GPU uses; ``busbw`` = algbw x 2(n-1)/n
for all_reduce, which is defined so that it approaches that rate).

Sources:
- NVLink per GPU, per direction (half the "bidirectional" figure NVIDIA quotes):
  V100 SXM2 NVLink 2 — 6 links x 25 GB/s = 150 (Tesla V100 datasheet, "300 GB/s");
  A100 SXM4 NVLink 3 — 12 x 25 = 300 (A100 datasheet, "600 GB/s");
  H100/H200 SXM5 NVLink 4 — 18 x 25 = 450 (H100 datasheet, "900 GB/s");
  B200/GB200 NVLink 5 — 900 (Blackwell datasheet, "1.8 TB/s").
- PCIe x16 per direction: Gen3 ~16, Gen4 ~32, Gen5 ~64 GB/s (PCI-SIG).
- InfiniBand 4x port rates (IBTA): EDR 100, HDR 200, NDR 400, XDR 800 Gb/s;
  Ethernet (RoCE) ports 100/200/400 GbE; GB/s = Gb/s / 8.
- EFA: p4d.24xlarge 4 x 100 Gb/s for 8 A100 (50 Gb/s per GPU); p5.48xlarge 32 x 100 Gb/s
  for 8 H100 (400 Gb/s per GPU) (AWS instance documentation).
- When the logs do not give the NIC rate, the reference platform of the GPU is assumed
  (DGX A100: one 200 Gb/s HDR NIC per GPU; DGX H100/B200: one 400 Gb/s NDR NIC per GPU)
  and the assumption is named in the result.

Judgement: a run's large-size bus bandwidth below ``POOR`` (50 %) of the link's rate is
"far below the link"; below ``DEGRADED`` (70 %) is "below". Healthy runs reach 75-95 %
(all_reduce on NVLink with NVLS or on rail-optimised IB can exceed 90 %).
"""

from __future__ import annotations

import re
from typing import Any

from ._lazy import lazy_compile

POOR = 0.5
DEGRADED = 0.7

# GPU model (as nvidia-smi / nccl-tests print it) → (NVLink GB/s per direction, platform NIC Gb/s per GPU)
GPU_LINKS: tuple[tuple[re.Pattern[str], float, float, str], ...] = (
    (lazy_compile(r"\b(?:GB|B)200\b|\bB100\b", re.I), 900.0, 400.0, "NVLink 5"),
    (lazy_compile(r"\bH(?:100|200|800)\b(?!.*PCIe)", re.I), 450.0, 400.0, "NVLink 4"),
    (lazy_compile(r"\bA(?:100|800)\b(?!.*PCIe)", re.I), 300.0, 200.0, "NVLink 3"),
    (lazy_compile(r"\bV100\b(?!.*PCIe)", re.I), 150.0, 100.0, "NVLink 2"),
    (lazy_compile(r"\bH100\b.*PCIe", re.I), 64.0, 400.0, "PCIe Gen5"),
    (lazy_compile(r"\bA100\b.*PCIe", re.I), 32.0, 200.0, "PCIe Gen4"),
)
IB_RATES_GBPS = {"EDR": 100.0, "HDR": 200.0, "NDR": 400.0, "XDR": 800.0}
EFA_PER_GPU_GBPS = {"A100": 50.0, "H100": 400.0, "H200": 400.0}

# NCCL INFO lines that say which transport a run used
_P2P = lazy_compile(r"via P2P/|via NVLS|NVLS multicast support is available|NVLink")
_NET_IB = lazy_compile(r"NET/IB\s*:\s*Using\s+(?P<nics>(?:\[\d+\]\S+\s*)+)")
_NET_OFI = lazy_compile(r"NET/OFI|Selected [Pp]rovider is efa|provider efa", re.I)
_NET_SOCKET = lazy_compile(r"NET/Socket\s*:\s*Using|Using network Socket")
_VIA_NET = lazy_compile(r"via NET/(?P<t>IB|Socket|AWS Libfabric|OFI|\w+)")
_IB_RATE = lazy_compile(
    r"^\s*Rate:\s*(?P<r>\d+)\s*$|active_speed:\s*\d+(?:\.\d+)?\s*Gbps\s*\((?P<s>\w+)\)|\b(?P<gen>EDR|HDR|NDR|XDR)\b"
)


class LinkSniffer:
    """Fed the lines of an nccl-tests file; tells the transport, NIC count and rate."""

    def __init__(self) -> None:
        self.p2p = False
        self.net: str | None = None  # ib | roce | efa | socket
        self.nics = 0
        self.rate_gbps: float | None = None
        self.rate_from: str | None = None

    def feed(self, line: str) -> None:
        if "NCCL" not in line and "Rate:" not in line and "active_speed" not in line:
            return
        if _P2P.search(line):
            self.p2p = True
        m = _NET_IB.search(line)
        if m:
            nics = m.group("nics")
            self.net = "roce" if "/RoCE" in nics else "ib"
            self.nics = max(self.nics, len(re.findall(r"\[\d+\]", nics)))
        elif _NET_OFI.search(line):
            self.net = "efa"
        elif _NET_SOCKET.search(line) and self.net is None:
            self.net = "socket"
        m = _VIA_NET.search(line)
        if m and self.net is None:
            t = m.group("t")
            self.net = "ib" if t == "IB" else "socket" if t == "Socket" else "efa"
        m = _IB_RATE.search(line)
        if m and self.rate_gbps is None:
            if m.group("r"):
                self.rate_gbps, self.rate_from = float(m.group("r")), line.strip()[:120]
            elif m.group("gen"):
                self.rate_gbps = IB_RATES_GBPS[m.group("gen").upper()]
                self.rate_from = line.strip()[:120]

    def facts(self) -> dict[str, Any]:
        return {
            "p2p": self.p2p,
            "net": self.net,
            "nics": self.nics or None,
            "nic_gbps": self.rate_gbps,
            "nic_gbps_from": self.rate_from,
        }


def expected_busbw(
    scope: str, gpu_model: str | None, link: dict[str, Any], gpus_per_node: int | None
) -> dict[str, Any] | None:
    """{gbs, link, basis} — the bus bandwidth the run's link can carry, or None when unknown."""
    nvlink = platform_nic = None
    name = None
    for rx, nv, nic, label in GPU_LINKS:
        if gpu_model and rx.search(gpu_model):
            nvlink, platform_nic, name = nv, nic, label
            break
    if scope == "intra_node":
        if nvlink is None:
            return None
        return {"gbs": nvlink, "link": name, "basis": f"{name} of {gpu_model}"}
    if scope != "inter_node":
        return None
    net = link.get("net")
    if net in (None, "socket"):
        return None  # a TCP socket's speed is the host NIC's, which the logs do not give
    per_gpu_gbps: float | None = None
    basis = ""
    if net == "efa":
        key = next((k for k in EFA_PER_GPU_GBPS if gpu_model and k in gpu_model), None)
        if key is None:
            return None
        per_gpu_gbps = EFA_PER_GPU_GBPS[key]
        basis = f"EFA on the {key} instance type ({per_gpu_gbps:g} Gb/s per GPU)"
    else:
        rate = link.get("nic_gbps")
        nics = link.get("nics") or gpus_per_node
        if rate is not None and nics and gpus_per_node:
            per_gpu_gbps = rate * min(nics, gpus_per_node) / gpus_per_node
            basis = f"{nics} x {rate:g} Gb/s {net.upper()} NICs for {gpus_per_node} GPUs (rate from the log)"
        elif platform_nic is not None:
            per_gpu_gbps = platform_nic
            basis = f"{net.upper()}, assumed one {platform_nic:g} Gb/s NIC per GPU (the reference platform of {gpu_model}; the log gives no rate)"
    if per_gpu_gbps is None:
        return None
    gbs = per_gpu_gbps / 8
    if nvlink is not None:
        gbs = min(gbs, nvlink)
    return {"gbs": gbs, "link": net.upper(), "basis": basis}


def size_collapse(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A message size whose bus bandwidth falls below half of both neighbours' while the
    sizes after it recover — a protocol/algorithm switch gone wrong (NCCL_PROTO, a tuner
    plugin, a buffer limit), not the fabric. Rows below 64 KiB (latency-bound) are ignored."""
    rows = [r for r in rows if r.get("size", 0) >= 1 << 16 and r.get("busbw") is not None]
    rows.sort(key=lambda r: r["size"])
    for i in range(1, len(rows) - 1):
        prev, cur, nxt = rows[i - 1]["busbw"], rows[i]["busbw"], rows[i + 1]["busbw"]
        later = max(r["busbw"] for r in rows[i + 1 :])
        if prev > 0 and cur < 0.5 * prev and cur < 0.5 * nxt and later >= 0.8 * prev:
            return {"row": rows[i], "before": rows[i - 1], "after": rows[i + 1]}
    # the largest sizes falling off what smaller sizes reached
    if len(rows) >= 4:
        peak = max(rows[:-1], key=lambda r: r["busbw"])
        last = rows[-1]
        if peak["busbw"] > 0 and last["busbw"] < 0.5 * peak["busbw"]:
            return {"row": last, "before": peak, "after": None, "tail": True}
    return None
