import pytest

from rankscope.analyzers.hardware import XID
from rankscope.testing import scenarios_isolation as S

from ._iso_helpers import analyze, assert_evidence_exact, kinds


@pytest.mark.parametrize(
    ("code", "action"), [(79, "drain"), (13, "app"), (64, "replace"), (119, "reset")]
)
def test_xid_codes_map_to_meaning_and_first_action(code, action):
    line = f"[Wed May 14 20:10:00 2025] NVRM: Xid (PCI:0000:3b:00): {code}, pid=1234, name=python, Ch 00000008"
    files = {"dmesg-gpu-q-7.log": (line + "\n").encode()}
    doc = analyze(files)
    (f,) = kinds(doc)["xid_decoded"]
    assert f["action"] == action and XID[code][0] in f["title"] and "gpu-q-7" in f["title"]
    assert doc["hardware"]["xid"][0]["host"] == "gpu-q-7"
    assert_evidence_exact(doc, files, ("xid_decoded",))


def test_nvidia_smi_problems_name_node_gpu_and_action():
    files = {
        **S.nvidia_smi_q(host="node-11", gpus=4, bad_gpu=3),
        **S.nvidia_smi_csv(host="node-12", temps=(40, 44)),
    }
    doc = analyze(files)
    (f,) = kinds(doc)["gpu_health"]
    assert f["hosts"] == ["node-11"] and "GPU 3" in f["title"] and f["action"] == "drain"
    assert_evidence_exact(doc, files, ("gpu_health",))
    assert any("DRAM Uncorrectable" in ev["text"] for ev in f["evidence"])


def test_repeat_offenders_come_from_history_hosts():
    files = S.worker_cascade(rank=5)
    doc = analyze(files, history_hosts={"node-01": 4, "elsewhere-9": 7})
    (f,) = kinds(doc)["repeat_offender"]
    assert f["hosts"] == ["node-01"] and f["past_incidents"] == 4
    assert [r["host"] for r in doc["hardware"]["repeat_offenders"]] == ["node-01"]
    assert "repeat_offender" not in kinds(analyze(files))
