"""Request bodies through a real gunicorn: cut short, chunked, or stalled.

A body shorter than its Content-Length, or a chunked one cut short, is refused and
nothing is stored; a complete chunked upload is stored whole; clients that stop sending
in the middle of a body are dropped after ``RANKSCOPE_REQUEST_BODY_TIMEOUT`` so they
cannot hold every web thread, and leave no row behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from apps.ingest.models import Artifact
from tests.conftest import ROOT, stop_process, wait_for, worker_env
from tests.ingest import logs
from tests.resilience.conftest import free_port

pytestmark = pytest.mark.timeout(120)

BODY_TIMEOUT = 2
THREADS = 2


class Gunicorn:
    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.tmp = tmp
        self.proc: subprocess.Popen | None = None

    def start(self) -> Gunicorn:
        self.log = (self.tmp / "gunicorn.log").open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "apps.wsgi:application",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                "1",
                "--threads",
                str(THREADS),
                "--control-socket",
                str(self.tmp / "gunicorn.ctl"),
            ],
            cwd=ROOT,
            env=worker_env({"RANKSCOPE_REQUEST_BODY_TIMEOUT": str(BODY_TIMEOUT)}),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_for(
            lambda: self.get("/healthz", timeout=10) is not None,
            timeout=30,
            message=lambda: (self.tmp / "gunicorn.log").read_text(errors="replace")[-2000:],
        )
        return self

    def stop(self) -> None:
        stop_process(self.proc)
        if hasattr(self, "log"):
            self.log.close()

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=30)

    def get(self, path: str, timeout: float = 30) -> int | None:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
                s.sendall(
                    f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
                )
                return status_of(read_all(s))
        except (OSError, IndexError, ValueError):  # not up yet, or no answer within timeout
            return None


def read_all(s: socket.socket) -> bytes:
    chunks = []
    with contextlib.suppress(OSError):
        while data := s.recv(65536):
            chunks.append(data)
    return b"".join(chunks)


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def body_of(response: bytes) -> dict:
    return json.loads(response.split(b"\r\n\r\n", 1)[1])


@pytest.fixture
def server(transactional_db, tmp_path) -> Iterator[Gunicorn]:
    g = Gunicorn(tmp_path)
    try:
        yield g.start()
    finally:
        g.stop()  # also when it never answered: no server left holding the database


@pytest.fixture
def token(transactional_db, team, owner) -> str:
    from apps.accounts.services import api_token_create

    return api_token_create(team=team, name="epilog", scope="ingest", actor=owner)[1]


def _head(path: str, token: str, extra: str) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Connection: close\r\n{extra}\r\n"
    ).encode()


def _raw_path(incident, name: str) -> str:
    return f"/api/v1/incidents/{incident.code}/artifacts/?name={name}"


def test_a_raw_body_shorter_than_its_content_length_is_refused_and_not_stored(
    server, token, incident
):
    data = logs.node_log(0) * 40
    sent = len(data) * 3 // 10
    with server.connect() as s:
        s.sendall(
            _head(
                _raw_path(incident, "node-00.out"),
                token,
                f"Content-Type: application/octet-stream\r\nContent-Length: {len(data)}\r\n",
            )
        )
        s.sendall(data[:sent])
        s.shutdown(socket.SHUT_WR)  # the client is gone: the body ends early
        response = read_all(s)
    assert status_of(response) == 400
    assert body_of(response)["code"] == "body_incomplete"
    assert not Artifact.objects.filter(incident=incident).exists()


def test_a_chunked_body_cut_short_is_refused_and_a_complete_one_is_stored_whole(
    server, token, incident
):
    data = logs.node_log(1, hung_rank=13)
    head = _head(
        _raw_path(incident, "node-01.out"),
        token,
        "Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n",
    )
    with server.connect() as s:
        s.sendall(head + f"{len(data):x}\r\n".encode() + data[: len(data) // 2])
        s.shutdown(socket.SHUT_WR)
        response = read_all(s)
    assert status_of(response) == 400, response[:300]
    assert body_of(response)["code"] == "body_incomplete"
    assert not Artifact.objects.filter(incident=incident).exists()

    with server.connect() as s:
        half = len(data) // 2
        s.sendall(head)
        for piece in (data[:half], data[half:]):
            s.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        s.sendall(b"0\r\n\r\n")
        response = read_all(s)
    assert status_of(response) == 202, response[:500]
    (artifact,) = Artifact.objects.filter(incident=incident)
    assert artifact.size == len(data) and artifact.sha256 == hashlib.sha256(data).hexdigest()


def test_stalled_uploads_do_not_starve_the_server_and_leave_no_row(server, token, incident):
    boundary = "rankscopeboundary"
    part = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
        'filename="rank-0.log"\r\nContent-Type: application/octet-stream\r\n\r\n'
    ).encode() + logs.node_log(0)[:2000]
    stalled = []
    for _ in range(THREADS * 5):  # far more stalled clients than the server has threads
        s = server.connect()
        s.sendall(
            _head(
                f"/api/v1/incidents/{incident.code}/artifacts/",
                token,
                f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
                f"Content-Length: {len(part) + 100_000}\r\n",
            )
            + part
        )
        stalled.append(s)
    try:
        t0 = time.monotonic()
        assert server.get("/healthz", timeout=60) is not None
        waited = time.monotonic() - t0
        # Each stalled body is abandoned after BODY_TIMEOUT: ten clients on two threads
        # clear in about five rounds, not never.
        assert waited < BODY_TIMEOUT * 5 * 2 + 10, waited
        answers = [status_of(read_all(s)) for s in stalled]
        assert set(answers) == {400}, answers
    finally:
        for s in stalled:
            s.close()
    assert not Artifact.objects.filter(incident=incident).exists()
