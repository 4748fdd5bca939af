"""The offline triage a login node installs: the wheel, the `rankscope` command, its contract.

The wheel is built from this checkout and installed into a fresh virtualenv with no
network: its dependencies (hyperscan, numpy, orjson, pyarrow, zstandard) are borrowed from the
test virtualenv through a ``.pth`` file, so what runs is the installed package, from a
directory where the checkout cannot be imported.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path
from typing import Any

import pytest
import zstandard

from apps.analysis import services as analysis_services
from apps.incidents.services import incident_create
from apps.ingest.models import Artifact
from apps.ingest.services import artifact_parse, artifact_upload
from rankscope import cli
from rankscope.testing.generate import generate

ROOT = Path(__file__).resolve().parent.parent
WEB_STACK = ("django", "celery", "rest_framework", "kombu", "apps")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the rankscope wheel installed; returns its bin/ directory."""
    base = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(base / "dist"),
            str(ROOT),
        ],
        check=True,
        cwd=base,
    )
    (wheel,) = (base / "dist").glob("rankscope-*.whl")
    env_dir = base / "venv"
    venv.create(env_dir, with_pip=True)
    bindir = env_dir / "bin"
    site = subprocess.run(
        [str(bindir / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # The engine's dependencies, without a network: the test virtualenv's site-packages,
    # *after* the fresh one, so the installed rankscope wins over nothing else.
    Path(site, "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [
            str(bindir / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        check=True,
    )
    return bindir


def _run(bindir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE")}
    return subprocess.run(
        [str(bindir / "rankscope"), *args], cwd=cwd, env=env, capture_output=True, text=True
    )


def _comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """The document without the run's own bookkeeping (durations)."""
    return {k: v for k, v in doc.items() if k != "analysis"}


@pytest.fixture(scope="module")
def oom_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("job")
    expected = generate("oom", out, ranks=16)["expected"]
    (out / "manifest.json").unlink()
    return out, expected


def test_the_installed_command_diagnoses_a_job_without_the_checkout(installed, oom_job, tmp_path):
    job, expected = oom_job
    files = sorted(str(p) for p in job.iterdir())
    where = _run(installed, "--version", cwd=tmp_path)
    assert where.returncode == 0 and where.stdout.startswith("rankscope ")
    done = _run(installed, "triage", *files, "--format", "json", cwd=tmp_path)
    assert done.returncode == cli.EXIT_FAILURE_FOUND, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == (
        expected["shape"],
        expected["category"],
    )
    assert doc["localization"]["culprit_ranks"] == expected["culprit_ranks"]
    # what ran is the installed package, and it loaded no part of the web stack
    probe = subprocess.run(
        [str(installed / "python"), "-c", _PROBE, *files],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    origin, loaded = json.loads(probe.stdout)
    assert origin.startswith(str(installed.parent)), origin
    assert [m for m in loaded if m.split(".")[0] in WEB_STACK] == []


_PROBE = """
import io, json, sys, contextlib
import rankscope
from rankscope.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(["triage", *sys.argv[1:], "--format", "json"])
print(json.dumps([rankscope.__file__, sorted(sys.modules)]))
"""


@pytest.mark.django_db
def test_the_command_gives_the_same_document_as_the_web_analysis(
    installed, oom_job, team, owner, tmp_path
):
    job, _ = oom_job
    files = sorted(job.iterdir())
    offline = _run(installed, "triage", *map(str, files), "--format", "json", cwd=tmp_path)
    incident = incident_create(team=team, title="16-rank OOM", actor=owner)
    for path in files:
        with path.open("rb") as fp:
            artifact_upload(incident=incident, fileobj=fp, name=path.name, actor=owner)
    for artifact in Artifact.objects.filter(incident=incident):
        artifact_parse(artifact_id=artifact.pk)
    run = analysis_services.analysis_request(incident=incident, trigger="manual", actor=owner)
    run = analysis_services.analysis_execute(run_id=run.pk, task_id=run.task_id)
    assert _comparable(json.loads(offline.stdout)) == _comparable(run.document)


def test_exit_codes_and_output_file(installed, tmp_path):
    healthy = tmp_path / "train.log"
    healthy.write_text("step 1 loss 2.1\nstep 2 loss 2.0\nTraining completed.\n")
    assert _run(installed, "triage", str(healthy), cwd=tmp_path).returncode == cli.EXIT_OK
    missing = _run(installed, "triage", str(tmp_path / "nope.log"), cwd=tmp_path)
    assert missing.returncode == cli.EXIT_USAGE
    assert "nope.log: no such file or directory" in missing.stderr
    assert _run(installed, "triage", cwd=tmp_path).returncode == cli.EXIT_USAGE
    out = tmp_path / "verdict.md"
    crashed = tmp_path / "rank_3.log"
    crashed.write_text(
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 3 has a total capacity of 79.15 GiB of which 1.06 GiB is free.\n"
    )
    done = _run(
        installed, "triage", str(crashed), "--format", "markdown", "-o", str(out), cwd=tmp_path
    )
    assert done.returncode == cli.EXIT_FAILURE_FOUND and done.stdout == ""
    assert "OOM" in out.read_text()


def test_compressed_rank_logs_are_read_as_streams(oom_job, tmp_path):
    job, expected = oom_job
    for i, path in enumerate(sorted(job.iterdir())):
        data = path.read_bytes()
        if i % 2:
            (tmp_path / f"{path.name}.zst").write_bytes(zstandard.ZstdCompressor().compress(data))
        else:
            (tmp_path / f"{path.name}.gz").write_bytes(gzip.compress(data))
    doc = cli.diagnose(sorted(tmp_path.iterdir()), jobs=2)
    plain = cli.diagnose(sorted(job.iterdir()), jobs=2)
    assert doc["triage"] == plain["triage"]
    assert doc["localization"]["culprit_ranks"] == expected["culprit_ranks"]
    # evidence names the log, not its compressed container
    assert sorted(a["name"] for a in doc["artifacts"]) == sorted(p.name for p in job.iterdir())
    assert _comparable(doc)["findings"] == _comparable(plain)["findings"]


_IMPORTS_PROBE = """
import io, json, sys, contextlib
from rankscope.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(["triage", *sys.argv[1:], "--format", "json"])
print(json.dumps(sorted(sys.modules)))
"""


def _loaded_by_triage(*paths: Path) -> set[str]:
    probe = subprocess.run(
        [sys.executable, "-c", _IMPORTS_PROBE, *map(str, paths)],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(json.loads(probe.stdout))


def test_a_small_log_is_diagnosed_without_loading_numpy_or_pyarrow(tmp_path):
    # start-up on a small file is mostly imports: numpy/pyarrow only when data needs them
    crashed = tmp_path / "rank_3.log"
    crashed.write_text(
        "[rank3]: Traceback (most recent call last):\n"
        '[rank3]:   File "train.py", line 9, in <module>\n'
        "[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    loaded = _loaded_by_triage(crashed)
    assert "numpy._core" not in loaded and "pyarrow" not in loaded
    # nor the archive readers (a plain log is not expanded) nor a process pool (one file)
    assert not loaded & {"tarfile", "zipfile", "zstandard", "rankscope.archives"}
    assert not loaded & {"multiprocessing", "concurrent.futures.process", "selectors"}
    # a metrics export does need them, and gets them
    csv = tmp_path / "metrics.csv"
    csv.write_text("step,rank,step_time\n" + "".join(f"{s},0,1.0\n" for s in range(1, 30)))
    assert {"numpy._core", "pyarrow"} <= _loaded_by_triage(crashed, csv)


def test_a_compressed_log_loads_the_archive_readers_it_needs(tmp_path):
    log = tmp_path / "rank_3.log.gz"
    log.write_bytes(gzip.compress(b"[rank3]: RuntimeError: CUDA error: an illegal memory access\n"))
    assert {"rankscope.archives", "gzip"} <= _loaded_by_triage(log)
    doc = cli.diagnose([log], jobs=1)
    assert [a["name"] for a in doc["artifacts"]] == ["rank_3.log"]


_PATTERNS_PROBE = """
import contextlib, gc, io, json, sys
from rankscope import _lazy
from rankscope.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(["triage", *sys.argv[1:], "--format", "json"])
kinds = [type(o).__name__ for o in gc.get_objects() if isinstance(o, _lazy._Pattern)]
print(json.dumps([len(kinds), kinds.count("_CompiledPattern")]))
"""


def test_a_small_log_compiles_few_of_the_regular_expressions(tmp_path):
    crashed = tmp_path / "rank_3.log"
    crashed.write_text(
        "[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    probe = subprocess.run(
        [sys.executable, "-c", _PATTERNS_PROBE, str(crashed)],
        capture_output=True,
        text=True,
        check=True,
    )
    declared, compiled = json.loads(probe.stdout)
    assert declared > 200 and compiled < declared // 4


def test_a_lazy_pattern_answers_as_the_compiled_one():
    import pickle
    import re

    from rankscope._lazy import lazy_compile

    text = "NCCL INFO comm 0x5a rank 3 nRanks 16 nNodes 2"
    for flags in (0, re.IGNORECASE):
        lazy = lazy_compile(r"rank (?P<r>\d+) n[Rr]anks (?P<n>\d+)", flags)
        plain = re.compile(r"rank (?P<r>\d+) n[Rr]anks (?P<n>\d+)", flags)
        assert lazy.pattern == plain.pattern and repr(lazy) == repr(plain)
        assert lazy.search(text).groupdict() == plain.search(text).groupdict()
        assert (lazy.flags, lazy.groups, lazy.groupindex) == (
            plain.flags,
            plain.groups,
            plain.groupindex,
        )
        assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in plain.finditer(text)]
        assert lazy.sub("#", text) == plain.sub("#", text)
        assert pickle.loads(pickle.dumps(lazy)) == plain
    assert lazy_compile(rb"\d+").findall(b"12 x 3") == [b"12", b"3"]


_PARSE_ONLY_PROBE = """
import io, json, sys
import rankscope
r = rankscope.parse_artifact(io.BytesIO(sys.argv[1].encode()), name="rank_3.log")
parsed_alone = "rankscope.analyzers" not in sys.modules
doc = rankscope.analyze([r])
print(json.dumps([parsed_alone, doc["triage"]["category"]]))
"""


def test_parsing_does_not_load_the_analysis_until_it_is_asked_for():
    # the parse processes of `rankscope triage` read files only: the analyzers are imported
    # by the parent while they work, and `rankscope.analyze` still answers as before
    line = "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    probe = subprocess.run(
        [sys.executable, "-c", _PARSE_ONLY_PROBE, line], capture_output=True, text=True, check=True
    )
    parsed_alone, category = json.loads(probe.stdout)
    assert parsed_alone is True
    assert category == "OOM"


def test_json_output_is_ascii_and_reads_back_as_the_document():
    # written fast (orjson) when it can be; escaped by json when a log line quoted in it has
    # other characters, or a number is beyond 64 bits: any terminal shows it, any reader
    # reads back the same document
    plain = {"triage": {"shape": "hang", "confidence": 0.8, "at": 2.5e-07}, "ranks": [0, 3]}
    quoted = {"evidence": "42%|████▏     | 3/7 [00:01<00:02] é — 😀", "ranks": {3: "node-1"}}
    huge = {"comm": 1 << 70}
    scripts = {"evidence": "".join(chr(0x4E00 + 7 * i) for i in range(40)) + " é — 😀"}
    for doc in (plain, quoted, huge, scripts):
        text = cli.render(doc, "json")
        assert text.isascii() and text.endswith("}\n")
        assert json.loads(text) == json.loads(json.dumps(doc))
    for doc in (quoted, scripts):
        assert cli.render(doc, "json") == json.dumps(doc, indent=2) + "\n"
    assert cli.render(plain, "json").startswith('{\n  "triage": {\n    "shape": "hang"')


_PARSE_PROBE = """
import json, pickle, sys
from rankscope.cli import _parse_file
packed = _parse_file(sys.argv[1], "rank_0.log", None)
blob = pickle.dumps(packed)  # what a parse process sends
loaded = "pyarrow" in sys.modules
from rankscope.cli import _unpack
m = _unpack(pickle.loads(blob)[0]).metrics
print(json.dumps([loaded, m.table.num_rows, m.columns, m.table.column("step").to_pylist()[:3]]))
"""


def test_a_parse_process_reads_iteration_lines_without_pyarrow(tmp_path):
    # the metrics of iteration lines go to the parent as plain columns; the Arrow table is
    # built there (pyarrow's import, ~50-100 ms, is not paid by a parse process)
    log = tmp_path / "rank_0.log"
    log.write_text(
        "".join(
            f" iteration {s:8d}/ 1000 | elapsed time per iteration (ms): {900 + s:.1f} |"
            f" lm loss: {2.0 - s / 1000:.4f} |\n"
            for s in range(1, 41)
        )
    )
    probe = subprocess.run(
        [sys.executable, "-c", _PARSE_PROBE, str(log)],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded, rows, columns, steps = json.loads(probe.stdout)
    assert loaded is False
    assert rows == 40 and {"step", "step_time", "loss"} <= set(columns) and steps == [1, 2, 3]
