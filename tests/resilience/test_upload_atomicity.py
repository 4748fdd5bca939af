"""The database connection drops at every step of an upload; a retry ends with exactly one
complete, parseable artifact, and bytes are never deleted while a committed row points at
them. Objects left with no row are removed by the storage sweep after its grace period."""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.db import OperationalError, connection
from django.urls import reverse

from apps.ingest import services, tasks
from apps.ingest.models import Artifact, ParseStatus
from apps.ingest.services import sweep
from apps.ingest.services import upload as upload_services
from tests.api.conftest import ApiClient
from tests.ingest import logs
from tests.resilience.conftest import terminate_backends

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def ingest_api(transactional_db, team, owner) -> ApiClient:
    from apps.accounts.services import api_token_create

    return ApiClient(api_token_create(team=team, name="epilog", scope="ingest", actor=owner)[1])


def _drop_own_connection() -> None:
    assert terminate_backends(pids=[connection.connection.info.backend_pid])


@contextlib.contextmanager
def _drop_before_store(monkeypatch) -> Iterator[None]:
    real = upload_services.store_stream

    def store(**kwargs):
        _drop_own_connection()
        return real(**kwargs)

    monkeypatch.setattr(upload_services, "store_stream", store)
    yield


@contextlib.contextmanager
def _drop_after_store(monkeypatch) -> Iterator[None]:
    real = upload_services.store_stream

    def store(**kwargs):
        out = real(**kwargs)
        _drop_own_connection()
        return out

    monkeypatch.setattr(upload_services, "store_stream", store)
    yield


@contextlib.contextmanager
def _drop_at_insert(monkeypatch) -> Iterator[None]:
    table = Artifact._meta.db_table

    def wrapper(execute, sql, params, many, context):
        if sql.startswith(f'INSERT INTO "{table}"'):
            _drop_own_connection()
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield


@contextlib.contextmanager
def _commit_wrapper(monkeypatch, *, reached_server: bool) -> Iterator[None]:
    """Break the COMMIT of the transaction that inserted the artifact row."""
    real = connection.commit
    table = Artifact._meta.db_table
    state = {"inserted": False, "done": False}

    def seen(execute, sql, params, many, context):
        if sql.startswith(f'INSERT INTO "{table}"'):
            state["inserted"] = True
        return execute(sql, params, many, context)

    def commit():
        if state["done"] or not state["inserted"]:
            return real()
        state["done"] = True
        if not reached_server:
            _drop_own_connection()  # the COMMIT fails: nothing was written
            return real()
        # The COMMIT is applied, then the connection dies before its reply arrives: the
        # client cannot tell this from a COMMIT that failed.
        real()
        _drop_own_connection()
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(connection, "commit", commit)
    with connection.execute_wrapper(seen):
        yield
    assert state["done"], "the commit was never reached"


@contextlib.contextmanager
def _drop_at_commit(monkeypatch) -> Iterator[None]:
    with _commit_wrapper(monkeypatch, reached_server=False):
        yield


@contextlib.contextmanager
def _commit_reply_lost(monkeypatch) -> Iterator[None]:
    with _commit_wrapper(monkeypatch, reached_server=True):
        yield


@contextlib.contextmanager
def _drop_in_enqueue(monkeypatch) -> Iterator[None]:
    def delay(*args, **kwargs):
        _drop_own_connection()  # as the drill did: the connection dies inside the enqueue

    monkeypatch.setattr(tasks.artifact_parse, "delay", delay)
    yield


STEPS: dict[str, Callable] = {
    "before store": _drop_before_store,
    "after store": _drop_after_store,
    "at the row's insert": _drop_at_insert,
    "at the row's commit": _drop_at_commit,
    "commit applied, reply lost": _commit_reply_lost,
    "in the on-commit enqueue": _drop_in_enqueue,
}


def _stored_objects(incident) -> list[str]:
    return sorted(sweep._walk_storage(f"incidents/{incident.code}"))


@pytest.mark.parametrize("step", list(STEPS))
def test_a_retry_after_a_dropped_connection_ends_with_one_complete_parseable_artifact(
    step, ingest_api, incident, monkeypatch
):
    data = logs.node_log(3, hung_rank=29)
    url = reverse("api:artifacts", args=[incident.code]) + "?name=node-03.out"
    with STEPS[step](monkeypatch):
        first = ingest_api.post(url, data=data, content_type="application/octet-stream")
    monkeypatch.undo()
    connection.close()
    # Whatever the first attempt answered, a retry is what the epilog does next.
    assert first.status_code in (202, 503), first.content[:300]
    retry = ingest_api.post(url, data=data, content_type="application/octet-stream")
    assert retry.status_code in (200, 202), retry.content[:300]

    (artifact,) = Artifact.objects.filter(incident=incident).exclude(
        parse_status=ParseStatus.REJECTED
    )
    with default_storage.open(artifact.storage_key, "rb") as fp:
        stored = fp.read()
    assert stored == data and artifact.sha256 == hashlib.sha256(data).hexdigest()
    assert services.artifact_parse(artifact_id=artifact.pk) == ParseStatus.PARSED
    artifact.refresh_from_db()
    assert artifact.ranks == list(range(24, 32))

    # Every other object the attempts left is unreferenced and goes with the sweep
    # (past its grace period); the artifact's bytes and parse outputs stay.
    leftover = [k for k in _stored_objects(incident) if not k.startswith(artifact.storage_key)]
    past = time.time() - 7200
    for key in leftover:
        os.utime(default_storage.path(key), (past, past))
    swept = services.artifact_storage_sweep(
        grace=timedelta(hours=1), incident_codes=[incident.code]
    )
    assert swept == leftover
    assert all(k.startswith(artifact.storage_key) for k in _stored_objects(incident))
    assert default_storage.exists(services.parsed_key_for(artifact))


def test_the_sweep_keeps_young_objects_and_everything_a_row_points_at(
    transactional_db, incident, owner
):
    (out,) = services.artifact_upload(
        incident=incident,
        fileobj=ContentFile(logs.node_log(0), name="node-00.out"),
        name="node-00.out",
        actor=owner,
    )
    services.artifact_parse(artifact_id=out.artifact.pk)
    orphan_old = default_storage.save(f"incidents/{incident.code}/aorphanold", ContentFile(b"x"))
    orphan_new = default_storage.save(f"incidents/{incident.code}/aorphannew", ContentFile(b"y"))
    past = time.time() - 7200
    for key in [orphan_old, out.artifact.storage_key, services.parsed_key_for(out.artifact)]:
        os.utime(default_storage.path(key), (past, past))

    call_command("sweep_storage", "--dry-run", "--grace", "3600")
    assert default_storage.exists(orphan_old)  # a dry run deletes nothing
    swept = services.artifact_storage_sweep(
        grace=timedelta(hours=1), incident_codes=[incident.code]
    )
    assert swept == [orphan_old]
    assert not default_storage.exists(orphan_old)
    assert default_storage.exists(orphan_new)  # an upload may still be writing its row
    assert default_storage.exists(out.artifact.storage_key)
    assert default_storage.exists(services.parsed_key_for(out.artifact))
