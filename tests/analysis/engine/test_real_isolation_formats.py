"""Isolation inputs as real tools print them (nccl-tests, nvidia-smi, kernel logs, AIStore):
regressions found by reading real public output. Every line here is ours (our hosts, values),
written in the exact layout the tool printed."""

from __future__ import annotations

import io

import rankscope as engine
from rankscope.parsers import detect_kind


def _parse(name: str, text: str) -> engine.ParseResult:
    return engine.parse_artifact(io.BytesIO(text.encode()), name=name)


def _run(r: engine.ParseResult) -> dict:
    (run,) = r.facts["nccl_tests"]["runs"]
    return run


# --- nccl-tests -------------------------------------------------------------------------------

OLD_NCCL_TESTS = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 536870912 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#   Rank  0 Pid  31001 on  trn-a-01 device  0 [0x07] NVIDIA A100-SXM4-80GB
#   Rank  1 Pid  31002 on  trn-a-01 device  1 [0x0b] NVIDIA A100-SXM4-80GB
#   Rank  2 Pid  40101 on  trn-a-02 device  0 [0x07] NVIDIA A100-SXM4-80GB
#   Rank  3 Pid  40102 on  trn-a-02 device  1 [0x0b] NVIDIA A100-SXM4-80GB
#
#                                                       out-of-place                       in-place
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        8192          2048     float     sum    88.10    0.09    0.14  2e-06    87.90    0.09    0.14  2e-06
   268435456      67108864     float     sum   3900.0   68.83  103.24  4e-07   3910.2   68.65  102.98  0e+00
   536870912     134217728     float     sum   7702.5   69.70  104.55  4e-07   7711.0   69.62  104.43  4e-07
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 69.31
#
"""


def test_old_nccl_tests_rank_lines_without_group_give_the_hosts() -> None:
    r = _parse("nccl.log", OLD_NCCL_TESTS)
    run = _run(r)
    assert run["hosts"] == ["trn-a-01", "trn-a-02"]
    assert run["ranks"] == 4
    assert run["scope"] == "inter_node"


def test_old_nccl_tests_error_column_is_not_a_count_of_wrong_elements() -> None:
    run = _run(_parse("nccl.log", OLD_NCCL_TESTS))
    assert run["error_column"] is True
    assert run["wrong"] == 0


def test_wrong_count_comes_from_the_out_of_bounds_footer() -> None:
    text = OLD_NCCL_TESTS.replace(
        "# Out of bounds values : 0 OK", "# Out of bounds values : 7 FAILED"
    )
    assert _run(_parse("nccl.log", text))["wrong"] == 7


NEW_ROW = (
    "   {size:>9}     {count:>9}     float     sum      -1   {t:>6}  {a:>6}  {b:>6}  {w:>5}"
    "   {t:>6}  {a:>6}  {b:>6}  {w:>5}"
)


def _new_table(prefix: str, hosts: list[str], rows: list[tuple[int, float, str]], **kw) -> str:
    lines = [
        "# nccl-tests version 2.17.1 nccl-headers=22602 nccl-library=22602",
        "# Collective test starting: all_reduce_perf_mpi",
        "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1073741824 step: 2(factor) warmup iters: 5 "
        "iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for i, h in enumerate(hosts):
        lines.append(
            f"#  Rank {i:2d} Group  0 Pid {5000 + i:6d} on {h:>10s} device {i % 8:2d} "
            f"[0000:1b:00] NVIDIA H100 80GB HBM3"
        )
    lines += [
        "#",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
        "time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
        "(us)  (GB/s)  (GB/s)",
    ]
    for size, busbw, wrong in rows:
        lines.append(
            NEW_ROW.format(
                size=size,
                count=size // 4,
                t="1000.0",
                a=f"{busbw / 1.9:.2f}",
                b=f"{busbw:.2f}",
                w=wrong,
            )
            + kw.get("tail", "")
        )
    lines += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {kw.get('avg', 12.5)} ",
        "#",
        "# Collective test concluded: all_reduce_perf_mpi",
    ]
    return "\n".join(prefix + ln for ln in lines) + "\n"


def test_mpirun_tag_output_prefix_is_peeled_and_the_mpi_build_names_the_test() -> None:
    text = _new_table(
        "[1,0]<stdout>:",
        ["gpu-b-01", "gpu-b-02"],
        [(1048576, 9.1, "0"), (268435456, 180.4, "0"), (1073741824, 190.2, "0")],
    )
    assert detect_kind("launcher.log", text.encode()) == "nccl_tests"
    r = _parse("launcher.log", text)
    assert r.error is None
    run = _run(r)
    assert run["test"] == "all_reduce_perf"
    assert run["hosts"] == ["gpu-b-01", "gpu-b-02"]
    assert [row["size"] for row in run["rows"]] == [1048576, 268435456, 1073741824]
    assert run["rows"][-1]["busbw"] == 190.2
    assert run["large_rows"] == 2


def test_ray_and_srun_label_prefixes_are_peeled_and_detected_without_the_out_of_place_line() -> (
    None
):
    for prefix in (
        "(head, rank=0, pid=4711) [1,0]<stdout>:",
        "0: ",
        "2024-05-02T10:11:12.123456Z ",
    ):
        text = _new_table(prefix, ["gpu-c-01", "gpu-c-02"], [(536870912, 300.0, "0")])
        text = "\n".join(ln for ln in text.split("\n") if "out-of-place" not in ln)
        assert detect_kind("job.log", text.encode()) == "nccl_tests", prefix
        run = _run(_parse("job.log", text))
        assert run["hosts"] == ["gpu-c-01", "gpu-c-02"], prefix
        assert run["rows"][0]["busbw"] == 300.0, prefix


def test_timestamp_column_after_in_place_is_not_read_as_bandwidth() -> None:
    text = _new_table(
        "", ["gpu-d-01", "gpu-d-02"], [(268435456, 150.0, "0")], tail="  2025-03-04 05:06:07"
    )
    (row,) = _run(_parse("nccl.txt", text))["rows"]
    assert row["busbw"] == 150.0 and row["ip_busbw"] == 150.0


def test_wrong_cells_printed_with_g_are_counted_as_elements() -> None:
    text = _new_table("", ["gpu-e-01"], [(268435456, 150.0, "3"), (536870912, 151.0, "1e+06")])
    text = text.replace("# Out of bounds values : 0 OK\n", "")
    assert _run(_parse("nccl.txt", text))["wrong"] == 2 * (3 + 1_000_000)


def test_a_full_size_sweep_is_compared_on_its_large_rows_not_its_average_line() -> None:
    # the same fabric: an 1 MiB..1 GiB sweep averages low because of its small sizes
    wide = _new_table(
        "",
        ["gpu-f-01", "gpu-f-02"],
        [(1048576, 9.0, "0"), (268435456, 181.0, "0"), (1073741824, 189.0, "0")],
        avg=60.1,
    )
    narrow = _new_table(
        "", ["gpu-f-03", "gpu-f-04"], [(536870912, 186.0, "0"), (1073741824, 190.0, "0")], avg=188.0
    )
    doc = engine.analyze([_parse("wide.txt", wide), _parse("narrow.txt", narrow)])
    assert not [f for f in doc["findings"] if f["kind"] == "nccl_tests_slow_group"]
    rows = {r["file"]: r for r in doc["isolation"]["nccl_tests"]}
    assert rows["wide.txt"]["busbw"] == 185.0
    assert rows["wide.txt"]["busbw_from"] == "large_rows"


def test_a_slow_pair_is_still_found_on_large_rows() -> None:
    good = _new_table("", ["gpu-g-01", "gpu-g-02"], [(1073741824, 190.0, "0")], avg=190.0)
    bad = _new_table("", ["gpu-g-03", "gpu-g-04"], [(1073741824, 41.0, "0")], avg=41.0)
    doc = engine.analyze([_parse("good.txt", good), _parse("bad.txt", bad)])
    (f,) = [f for f in doc["findings"] if f["kind"] == "nccl_tests_slow_group"]
    assert f["hosts"] == ["gpu-g-03", "gpu-g-04"]


# --- nvidia-smi -------------------------------------------------------------------------------

TABLE_HEAD = """\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.90.07              Driver Version: 550.90.07      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
"""


def _gpu_findings(doc: dict) -> list[dict]:
    return [f for f in doc["findings"] if f["kind"] == "gpu_health"]


def test_a_gpu_nvidia_smi_cannot_reach_is_a_finding_quoting_that_line() -> None:
    text = (
        "Unable to determine the device handle for GPU3: 0000:9C:00.0: Unknown Error\n"
        + TABLE_HEAD
        + "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:1B:00.0 Off |"
        "                    0 |\n"
        "| N/A   36C    P0             90W /  700W |       4MiB /  81559MiB |"
        "      0%      Default |\n"
    )
    r = _parse("nvidia-smi-gpu-h-07.txt", text)
    assert r.kind == "nvidia_smi"
    lost = [e for e in r.events if e.fields["readings"].get("lost")]
    assert len(lost) == 1 and lost[0].fields["gpu"] == 3
    assert lost[0].fields["readings"]["bus"] == "0000:9C:00.0"
    (f,) = _gpu_findings(engine.analyze([r]))
    assert f["hosts"] == ["gpu-h-07"] and f["action"] == "drain"
    assert f["evidence"][0]["line"] == 1


def test_the_bus_id_alone_form_of_the_unreachable_gpu_line() -> None:
    r = _parse(
        "nvidia-smi-gpu-h-08.txt",
        "Unable to determine the device handle for GPU0000:5D:00.0: Unknown Error\n"
        "No devices were found\n",
    )
    (e,) = r.events
    assert e.fields["readings"]["bus"] == "0000:5D:00.0"
    assert e.fields["readings"]["lost"] == "Unknown Error"


def test_err_in_the_old_table_marks_the_gpu_unreachable() -> None:
    text = (
        "| NVIDIA-SMI 470.82.01    Driver Version: 470.82.01    CUDA Version: 11.4     |\n"
        "|   1  Tesla V100-SXM2...  On   | 00000000:1C:00.0 Off |                  N/A |\n"
        "|ERR!  ERR!  ERR!    ERR! / ERR!|   1024MiB / 32510MiB |    ERR!      Default |\n"
    )
    r = _parse("nvidia-smi-gpu-v-02.txt", text)
    (e,) = r.events
    assert e.fields["readings"]["lost"]
    (f,) = _gpu_findings(engine.analyze([r]))
    assert f["evidence"][0]["line"] == 3


def test_a_busy_gpu_at_its_power_cap_is_not_a_hardware_finding() -> None:
    text = (
        TABLE_HEAD + "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:1B:00.0 Off |"
        "                    0 |\n"
        "| N/A   61C    P0            699W /  700W |   70000MiB /  81559MiB |"
        "    100%      Default |\n"
    )
    doc = engine.analyze([_parse("nvidia-smi-gpu-h-09.txt", text)])
    assert not _gpu_findings(doc)
    assert doc["hardware"]["gpus"][0]["notes"]


CSV_LOOP = """\
timestamp, index, pci.bus_id, temperature.gpu, power.draw [W], power.limit [W], clocks.sm [MHz], clocks.max.sm [MHz]
2025/01/09 03:00:00.001, 0, 00000000:1B:00.0, 58, 380.10 W, 400.00 W, 1410 MHz, 1410 MHz
2025/01/09 03:00:00.002, 1, 00000000:2C:00.0, 59, 381.20 W, 400.00 W, 1410 MHz, 1410 MHz
2025/01/09 03:00:10.001, 0, 00000000:1B:00.0, 60, 80.30 W, 400.00 W, 600 MHz, 1410 MHz
2025/01/09 03:00:10.002, 1, 00000000:2C:00.0, 87, 300.40 W, 400.00 W, 810 MHz, 1410 MHz
2025/01/09 03:00:20.001, 0, 00000000:1B:00.0, 59, 379.90 W, 400.00 W, 1410 MHz, 1410 MHz
2025/01/09 03:00:20.002, 1, 00000000:2C:00.0, 66, 382.00 W, 400.00 W, 1410 MHz, 1410 MHz
"""


def test_a_looping_csv_is_one_reading_per_gpu_with_its_worst_sample() -> None:
    r = _parse("gpu-monitor-gpu-a-04.csv", CSV_LOOP)
    assert len(r.events) == 2
    by_gpu = {e.fields["gpu"]: e.fields for e in r.events}
    g1 = by_gpu[1]["readings"]
    assert g1["samples"] == 3 and g1["temp_c"] == 87 and g1["sm_clock_mhz"] == 810
    assert by_gpu[1]["lines"]["temp_c"][0] == 5
    # GPU 0's 600 MHz sample was idle (80 W): not a slow clock under load
    assert by_gpu[0]["readings"]["sm_clock_mhz"] == 1410
    doc = engine.analyze([r])
    (f,) = _gpu_findings(doc)
    assert "GPU 1" in f["title"] and "SM clock 810" in f["title"]


def test_q_reset_flags_sram_threshold_and_t_limit_margin() -> None:
    text = """\
==============NVSMI LOG==============

Driver Version                            : 550.90.07

GPU 00000000:4E:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    Minor Number                          : 5
    GPU Reset Status
        Reset Required                    : Yes
        Drain and Reset Recommended       : No
    ECC Errors
        Volatile
            SRAM Correctable              : 0
            SRAM Uncorrectable Parity     : 0
            SRAM Uncorrectable SEC-DED    : 0
            DRAM Correctable              : 0
            DRAM Uncorrectable            : 0
        Aggregate
            SRAM Correctable              : 0
            SRAM Uncorrectable Parity     : 3
            SRAM Uncorrectable SEC-DED    : 0
            DRAM Correctable              : 0
            DRAM Uncorrectable            : 0
            SRAM Threshold Exceeded       : Yes
    Temperature
        GPU Current Temp                  : 79 C
        GPU T.Limit Temp                  : 1 C
        GPU Shutdown T.Limit Temp         : -5 C
        GPU Slowdown T.Limit Temp         : -2 C
        GPU Max Operating T.Limit Temp    : 0 C
"""
    r = _parse("nvidia-smi-q-gpu-h-11.txt", text)
    (e,) = r.events
    rd = e.fields["readings"]
    assert rd["reset_required"] == "Yes" and rd["sram_threshold_exceeded"] == "Yes"
    assert rd["t_limit_margin_c"] == 1 and rd["slowdown_t_limit_c"] == -2
    assert rd["ecc_uncorrected_aggregate"] == 3
    (f,) = _gpu_findings(engine.analyze([r]))
    assert f["action"] == "replace"
    lines = {ev["line"] for ev in f["evidence"]}
    assert 24 in lines  # the SRAM Threshold Exceeded line


# --- kernel logs ------------------------------------------------------------------------------


def _xid_rows(doc: dict) -> list[dict]:
    return doc.get("hardware", {}).get("xid", [])


def test_multi_line_fallen_off_the_bus_without_an_xid_is_decoded_as_xid_79() -> None:
    text = (
        "[ 9120.004411] NVRM: The NVIDIA GPU 0000:c1:00.0\n"
        "               NVRM: (PCI ID: 10de:2330) installed in this system has\n"
        "               NVRM: fallen off the bus and is not responding to commands.\n"
        "[ 9120.118822] NVRM: The NVIDIA probe routine failed for 1 device(s).\n"
    )
    doc = engine.analyze([_parse("dmesg-gpu-k-03.log", text)])
    (row,) = _xid_rows(doc)
    assert row["xid"] == 79 and row["action"] == "drain" and row["host"] == "gpu-k-03"
    (f,) = [f for f in doc["findings"] if f["kind"] == "xid_decoded"]
    assert f["evidence"][0]["line"] == 3


def test_single_line_fallen_off_the_bus_keeps_its_pci_and_is_not_doubled_by_xid_79() -> None:
    text = (
        "[ 301.5] NVRM: GPU 0000:4e:00.0: GPU has fallen off the bus.\n"
        "[ 301.6] NVRM: Xid (PCI:0000:4e:00): 79, pid='<unknown>', name=<unknown>, "
        "GPU has fallen off the bus.\n"
    )
    r = _parse("dmesg-gpu-k-04.log", text)
    (off,) = [e for e in r.events if e.kind == "gpu_off_bus"]
    assert off.fields["pci"] == "0000:4e:00.0"
    assert [row["xid"] for row in _xid_rows(engine.analyze([r]))] == [79]


def test_xid_pci_is_mapped_to_the_gpu_index_from_nvidia_smi_of_the_same_host() -> None:
    dmesg = (
        "2025-02-03T04:05:06,789012+00:00 NVRM: Xid (PCI:0000:9c:00): 48, pid='<unknown>', "
        "name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in "
        "the framebuffer at partition 1, subpartition 0.\n"
    )
    smi = (
        TABLE_HEAD + "|   3  NVIDIA H100 80GB HBM3          On  |   00000000:9C:00.0 Off |"
        "                    1 |\n"
        "| N/A   40C    P0            120W /  700W |       4MiB /  81559MiB |"
        "      0%      Default |\n"
    )
    doc = engine.analyze(
        [_parse("dmesg-gpu-k-05.log", dmesg), _parse("nvidia-smi-gpu-k-05.txt", smi)]
    )
    (row,) = _xid_rows(doc)
    assert row["gpu"] == 3 and row["host"] == "gpu-k-05"
    (f,) = [f for f in doc["findings"] if f["kind"] == "xid_decoded"]
    assert "GPU 3 (PCI:0000:9c:00)" in f["title"]


def test_a_word_after_the_tool_name_is_not_taken_for_a_host() -> None:
    from rankscope.detect import host_from_name

    assert host_from_name("dmesg-T.txt") is None
    assert host_from_name("dmesg-before.log") is None
    assert host_from_name("nvidia-smi-full.txt") is None
    assert host_from_name("dmesg-gpubox.log") == "gpubox"
    assert host_from_name("dmesg-gpu-k-07.log") == "gpu-k-07"


# --- AIStore ----------------------------------------------------------------------------------

AIS_LOG = """\
Started up at 2025/02/10 07:15:02, host ais-target-4, go1.23.4 for linux/amd64
W 07:15:02.118233 config:1506 control and data share the same intra-cluster network
I 07:15:02.118410 daemon:311 Version 3.27.1a2b3c4, build 2025-02-09T19:20:12+0000, CPUs(64, runtime=64)
E 07:31:44.902117 x-get-batch:212 out-of-bounds index 9 (num entries 4)
"""


def test_a_daemon_log_saved_under_its_pod_name_is_that_daemon() -> None:
    r = _parse("ais-target-4.log", AIS_LOG)
    assert r.kind == "aistore"
    assert r.hosts == ["ais-target-4"]
    assert {e.fields["daemon"] for e in r.events} == {"ais-target-4"}


def test_a_daemon_log_under_any_name_is_detected_by_its_first_line() -> None:
    assert detect_kind("storage/t4.txt", AIS_LOG.encode()) == "aistore"
    r = _parse("storage/t4.txt", AIS_LOG)
    assert r.kind == "aistore"
    assert {e.fields["daemon"] for e in r.events} == {"ais-target-4"}
    (oob,) = [e for e in r.events if e.kind == "ais_out_of_bounds"]
    assert oob.time == "2025-02-10T07:31:44.902117" and oob.line == 4
