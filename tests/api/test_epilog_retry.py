"""The epilog scripts against a server that is busy (429) or failing (5xx) before it
accepts: they retry, wait what ``Retry-After`` asks within their bound, post the same
complete request with the same Idempotency-Key, and keep what they could not send."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.api.test_epilog_scripts import CTLD_EPILOG, NODE_EPILOG, Site

pytestmark = pytest.mark.timeout(120)


class Scripted:
    """A local HTTP server answering each POST with the next (status, Retry-After)."""

    def __init__(self, answers: list[tuple[int, str | None]]) -> None:
        self.answers = list(answers)
        self.requests: list[dict] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                owner.requests.append(
                    {"at": time.monotonic(), "headers": dict(self.headers), "body": body}
                )
                status, retry_after = owner.answers.pop(0) if owner.answers else (202, None)
                payload = (
                    b'{"incident": "i1", "created": false, "analysis": "settling", "files": []}'
                )
                self.send_response(status)
                if retry_after is not None:
                    self.send_header("Retry-After", retry_after)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                return None

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Scripted:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _without_boundary(request: dict) -> bytes:
    boundary = request["headers"]["Content-Type"].split("boundary=", 1)[1].encode()
    return request["body"].replace(boundary, b"BOUNDARY")


@pytest.fixture
def site(tmp_path) -> Iterator[Site]:
    yield Site(tmp_path, "http://127.0.0.1:9", "rsk_test_token")


def _conf(site: Site, url: str, *, retries: int = 5, budget: int = 30) -> None:
    site.write_conf(
        url,
        extra=f"RANKSCOPE_RETRIES={retries}\nRANKSCOPE_RETRY_MAX_SECONDS={budget}\n",
    )


def test_the_node_epilog_waits_what_retry_after_asks_then_delivers(site):
    site.job_logs("4242", {"rank_7.log": b"[rank7]: NCCL watchdog timeout\n"})
    with Scripted([(429, "2"), (202, None)]) as server:
        _conf(site, server.url)
        code, elapsed = site.run(NODE_EPILOG, site.env("4242", SLURMD_NODENAME="node007"))
    assert code == 0
    first, second = server.requests
    assert second["at"] - first["at"] >= 2.0, "Retry-After was not honoured"
    assert elapsed < 15
    # The same request again: same key, the whole body (the archive of the logs).
    assert first["headers"]["Idempotency-Key"] == second["headers"]["Idempotency-Key"]
    assert _without_boundary(first) == _without_boundary(second)
    assert b'name="file"' in second["body"]
    assert not any(site.spool.iterdir()), "delivered: the spool is removed"
    assert "retry 1 of 5 in 2 s" in site.log.read_text()


def test_the_controller_epilog_retries_5xx_and_429_and_removes_its_spool_once_accepted(site):
    with Scripted([(503, "1"), (429, "1"), (202, None)]) as server:
        _conf(site, server.url)
        code, _ = site.run(CTLD_EPILOG, site.env("4343", SLURM_JOB_NAME="pretrain"))
    assert code == 0
    assert [r["headers"]["Idempotency-Key"] for r in server.requests] == [
        "slurmctld-eos-4343-0"
    ] * 3
    assert b'"job_name":"pretrain"' in server.requests[-1]["body"]
    assert not any(site.ctld_spool.iterdir())


def test_a_retry_after_beyond_the_bound_is_not_waited_for_and_the_record_stays_spooled(site):
    with Scripted([(429, "3600")]) as server:
        _conf(site, server.url, budget=10)
        code, elapsed = site.run(CTLD_EPILOG, site.env("4444"))
        assert code == 0 and elapsed < 10
        assert len(server.requests) == 1
        assert len(list(site.ctld_spool.iterdir())) == 1

        # The next job's controller epilog sends its own record and the one left behind.
        code, _ = site.run(CTLD_EPILOG, site.env("4445"))
    assert code == 0
    jobs = [b"job_id" in r["body"] and r["body"] for r in server.requests[1:]]
    assert len(jobs) == 2 and any(b"4444" in j for j in jobs) and any(b"4445" in j for j in jobs)
    assert not any(site.ctld_spool.iterdir())


def test_a_refusal_is_not_retried(site):
    site.job_logs("4646", {"rank_0.log": b"x\n"})
    with Scripted([(403, None)]) as server:
        _conf(site, server.url)
        code, _ = site.run(NODE_EPILOG, site.env("4646", SLURMD_NODENAME="node001"))
    assert code == 0 and len(server.requests) == 1
    assert not any(site.spool.iterdir())
