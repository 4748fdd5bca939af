import io
import json

import pytest

import rankscope as engine
from rankscope.testing import scenarios_isolation as S


def _parse(name: str, data: bytes) -> engine.ParseResult:
    return engine.parse_artifact(io.BytesIO(data), name=name)


@pytest.mark.parametrize("with_root", [True, False])
def test_nccl_tests_rows_hosts_and_average_are_read(with_root):
    data = S.nccl_tests(hosts=["gpu-a-1", "gpu-a-2"], busbw=40.0, with_root=with_root)
    r = _parse("all_reduce.log", data)
    assert r.kind == "nccl_tests" and r.error is None
    (run,) = r.facts["nccl_tests"]["runs"]
    assert (
        run["hosts"] == ["gpu-a-1", "gpu-a-2"]
        and run["scope"] == "inter_node"
        and run["ranks"] == 16
    )
    assert run["avg_busbw"] == pytest.approx(32.0)
    assert run["peak_busbw"] == pytest.approx(40.0, rel=1e-3)
    ev = r.events[0]
    assert data.decode().split("\n")[ev.line - 1] == ev.text and "Avg bus bandwidth" in ev.text


def test_nccl_tests_without_rows_is_a_clear_error():
    r = _parse("x_perf.txt", b"# nccl-tests\nnothing here out-of-place busbw\n")
    assert r.error and "no nccl-tests result rows" in r.error


def test_nvidia_smi_q_readings_keep_their_lines():
    files = S.nvidia_smi_q(host="gpu-b-7", gpus=3, bad_gpu=2)
    ((name, data),) = files.items()
    r = _parse(name, data)
    assert r.kind == "nvidia_smi" and r.error is None and r.hosts == ["gpu-b-7"]
    gpus = [e for e in r.events if e.kind == "gpu_reading"]
    assert len(gpus) == 3
    bad = gpus[2].fields["readings"]
    assert (
        bad["ecc_uncorrected_volatile"] == 3
        and bad["remapped_uncorrectable"] == 1
        and bad["temp_c"] == 91
    )
    line, text = gpus[2].fields["lines"]["ecc_uncorrected_volatile"]
    assert data.decode().split("\n")[line - 1] == text and "DRAM Uncorrectable" in text
    assert gpus[0].fields["readings"]["ecc_uncorrected_volatile"] == 0


def test_nvidia_smi_csv_is_detected_and_read():
    ((_name, data),) = S.nvidia_smi_csv(host="n7", temps=(41, 93, 50)).items()
    r = _parse("gpu_query.csv", data)
    assert r.kind == "nvidia_smi"
    temps = [e.fields["readings"]["temp_c"] for e in r.events]
    assert temps == [41, 93, 50]


def test_topology_csv_and_json_map_hosts_to_switches():
    csv = S.topology_csv({"h1": ("sw-1", "r1"), "h2": ("sw-2", "r1")})
    r = _parse("cluster_map.csv", csv)
    assert r.kind == "topology", "a host,switch header is detected whatever the file name"
    assert r.facts["topology"]["h2"] == {"switch": "sw-2", "rack": "r1", "line": 3}
    j = _parse("topology.json", S.topology_json({"h1": "leaf-a", "h9": "leaf-b"}))
    assert j.facts["topology"]["h9"]["switch"] == "leaf-b"
    ev = next(e for e in j.events if e.host == "h9")
    assert '"h9"' in ev.text


def test_bisection_csv_and_json():
    r = _parse("bisect_scale.csv", S.bisection_csv("gpus", [(8, "ok"), (64, "OOM")]))
    assert [(e.fields["value"], e.fields["outcome"]) for e in r.events] == [
        (8, "works"),
        (64, "fails"),
    ]
    assert [e.line for e in r.events] == [2, 3]
    data = json.dumps(
        [
            {"variable": "batch_size", "value": 16, "outcome": "works"},
            {"variable": "batch_size", "value": 32, "outcome": "fails", "note": "OOM at step 3"},
        ],
        indent=1,
    ).encode()
    j = _parse("bisection.json", data)
    assert [e.fields["outcome"] for e in j.events] == ["works", "fails"]
    assert all(str(e.fields["value"]) in e.text for e in j.events)


def test_aistore_file_times_stats_and_error_kinds():
    files = S.aistore_target(idx=4, offset_hours=0)
    ((name, data),) = files.items()
    r = _parse(name, data)
    assert r.kind == "aistore" and r.error is None
    a = r.facts["aistore"]
    assert a["daemon"] == "ais-target-4" and a["role"] == "target" and a["timezone"] == "UTC"
    assert a["file_start"].startswith("2025-05-14T20:00:00")
    assert a["stats"] and "err.get.n" in a["stats"][-1]["counters"]
    got = {e.kind for e in r.events}
    assert {
        "ais_restart",
        "ais_pressure",
        "ais_stream_broken",
        "ais_out_of_bounds",
        "ais_dropped",
    } <= got
    for e in r.events:
        assert data.decode().split("\n")[e.line - 1] == e.text


def test_aistore_times_roll_over_midnight():
    data = b"I 23:59:58.000000 x:1 a\nE 00:00:02.000000 x:1 broken thing\n"
    r = _parse("aistarget.t1.INFO.0514-235900.1", data)
    (e,) = r.events
    assert e.time.endswith("05-15T00:00:02")
