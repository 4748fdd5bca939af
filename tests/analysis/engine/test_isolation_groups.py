from rankscope.testing import scenarios_isolation as S

from ._iso_helpers import analyze, assert_evidence_exact, kinds


def test_nccl_tests_slow_group_names_its_hosts_and_the_switch_they_share():
    files = {
        "ib/good.txt": S.nccl_tests(hosts=["a-00", "a-01"], busbw=42.0),
        "ib/bad.txt": S.nccl_tests(hosts=["a-02", "a-03"], busbw=17.0),
        "topo.csv": S.topology_csv(
            {
                "a-00": ("sw1", "r1"),
                "a-01": ("sw1", "r1"),
                "a-02": ("sw4", "r2"),
                "a-03": ("sw4", "r2"),
            }
        ),
    }
    doc = analyze(files, expected_busbw=45.0)
    (f,) = kinds(doc)["nccl_tests_slow_group"]
    assert f["hosts"] == ["a-02", "a-03"] and "sw4" in f["title"]
    assert any(
        row["busbw"] < 20 and row["switches"] == ["sw4"] for row in doc["isolation"]["nccl_tests"]
    )
    assert_evidence_exact(doc, files, ("nccl_tests_slow_group", "nccl_tests_below_expected"))


def test_equal_nccl_tests_results_raise_nothing():
    files = {
        "x/1.txt": S.nccl_tests(hosts=["a-00", "a-01"], busbw=40.0),
        "x/2.txt": S.nccl_tests(hosts=["a-02", "a-03"], busbw=39.0),
    }
    doc = analyze(files)
    assert "nccl_tests_slow_group" not in kinds(doc)


def test_comm_isolated_to_a_node_and_its_switch():
    files = {
        "metrics.csv": S.metrics_csv(ranks=12, hosts_per=4, slow_comm_hosts=(2,), steps=60),
        "topology.csv": S.topology_csv(
            {"node-00": ("s1", "r1"), "node-01": ("s1", "r1"), "node-02": ("s9", "r2")}
        ),
    }
    k = kinds(analyze(files))
    assert k["isolated_comm_node"][0]["affected"] == ["node-02"]
    assert k["isolated_comm_switch"][0]["affected"] == ["s9"]
    assert "isolated_compute_node" not in k
    ev = k["isolated_comm_node"][0]["evidence"][0]
    assert files["metrics.csv"].decode().split("\n")[ev["line"] - 1].split(",")[2] == "node-02"


def test_bisection_reports_breaking_point_and_non_monotonic_runs():
    files = {
        "bisect.csv": S.bisection_csv(
            "layers", [(12, "works"), (48, "fails"), (24, "works"), (36, "fails")]
        )
    }
    doc = analyze(files)
    (f,) = kinds(doc)["bisection_breaking_point"]
    assert f["breaking_point"] == {"last_working": 24, "first_failing": 36}
    assert_evidence_exact(doc, files, ("bisection_breaking_point",))
    files2 = {"bisect.csv": S.bisection_csv("gpus", [(8, "works"), (16, "fails"), (32, "works")])}
    (g,) = kinds(analyze(files2))["bisection_breaking_point"]
    assert "not monotonic" in g["title"]
