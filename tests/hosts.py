"""Rankscope processes as on separate hosts: each "host" gets its own working directory,
temporary directory and var directory, and shares only PostgreSQL, Redis and the object
store with the others. Used by the shares-nothing test and the load benchmark."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OPEN_AUDIT = Path(__file__).resolve().parent / "scaleout" / "openaudit"


RECIPE = ROOT / "deploy" / "compose.hosts.yml"


def recipe() -> dict:
    """``deploy/compose.hosts.yml``: the services a web or worker host runs."""
    import yaml

    return yaml.safe_load(RECIPE.read_text())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Host:
    """One machine's worth of directories, and the Rankscope processes started on it."""

    def __init__(
        self, base: Path, name: str, env: dict[str, str], *, audit_root: Path | None = None
    ) -> None:
        self.name = name
        self.dir = base / name
        self.work = self.dir / "work"
        self.tmp = self.dir / "tmp"
        self.var = self.dir / "var"
        for d in (self.work, self.tmp, self.var):
            d.mkdir(parents=True, exist_ok=True)
        self.audit_log = base.parent / f"{base.name}-{name}-opens.log" if audit_root else None
        self._env = dict(env)
        self._env.update(
            TMPDIR=str(self.tmp),
            RANKSCOPE_VAR_DIR=str(self.var),
            PYTHONPATH=os.pathsep.join([*([str(OPEN_AUDIT)] if audit_root else []), str(ROOT)]),
        )
        if audit_root and self.audit_log:
            self._env.update(
                RANKSCOPE_TEST_OPEN_WATCH=str(audit_root),
                RANKSCOPE_TEST_OPEN_LOG=str(self.audit_log),
            )
        self.procs: list[tuple[str, subprocess.Popen, Path]] = []

    def env(self) -> dict[str, str]:
        """The environment of a process on this host."""
        return dict(self._env)

    def _start(self, role: str, args: list[str]) -> subprocess.Popen:
        log = self.dir / f"{role}-{len(self.procs)}.log"
        proc = subprocess.Popen(
            args,
            cwd=self.work,
            env=self._env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append((role, proc, log))
        return proc

    def start_service(
        self, name: str, *, port: int | None = None, processes: int | None = None
    ) -> str:
        """Start ``name`` of ``deploy/compose.hosts.yml`` with the command that file gives it.

        Changed only as loopback needs: gunicorn binds 127.0.0.1:``port``; ``processes``
        replaces gunicorn's ``--workers`` or Celery's ``--concurrency``; a worker's
        ``--hostname`` is made unique to this host. Returns the web URL (web) or "".
        """
        args = [str(a) for a in recipe()["services"][name]["command"]]
        url = ""
        for i, a in enumerate(args[:-1]):
            if a == "--bind" and port is not None:
                args[i + 1] = f"127.0.0.1:{port}"
                url = f"http://127.0.0.1:{port}"
            elif a in ("--workers", "--concurrency") and processes is not None:
                args[i + 1] = str(processes)
            elif a == "--hostname":
                args[i + 1] = args[i + 1].replace("%h", f"{self.name}-{time.time_ns()}")
        bin_dir = Path(sys.executable).parent
        if args[0] == "gunicorn":
            args[0] = str(bin_dir / "gunicorn")
        elif args[0] in ("celery", "python"):
            args = [sys.executable, *(["-m", "celery"] if args[0] == "celery" else []), *args[1:]]
        self._start(name, args)
        return url

    def start_web(self, *, port: int, workers: int = 2) -> str:
        """A web host of the recipe: its ``web`` service."""
        return self.start_service("web", port=port, processes=workers)

    def start_worker(self, *, concurrency: int = 1) -> None:
        """A worker host of the recipe: its ingest and analysis workers."""
        for name, svc in recipe()["services"].items():
            if "worker" in svc.get("profiles", []):
                self.start_service(name, processes=concurrency)

    def logs(self) -> str:
        return "\n".join(
            f"--- {self.name} {role} ---\n{log.read_text(errors='replace')[-4000:]}"
            for role, _, log in self.procs
            if log.exists()
        )

    def opened(self) -> list[str]:
        """Paths under the watched root this host's processes opened."""
        if not self.audit_log or not self.audit_log.exists():
            return []
        return [line.split("\t", 2)[2] for line in self.audit_log.read_text().splitlines()]

    def stop(self) -> None:
        for _, proc, _ in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
        for _, proc, _ in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
