"""POST /api/v1/ingest/slurm: one incident per job run, files stored once, 202 fast."""

from __future__ import annotations

import io
import json
import threading
import time

import pytest
import requests

from apps.incidents.models import Incident, IncidentEvent

URL = "/api/v1/ingest/slurm"


def _file(name: str, body: bytes) -> io.BytesIO:
    f = io.BytesIO(body)
    f.name = name
    return f


def _post(client, **fields):
    return client.post(URL, fields)


def test_the_first_node_opens_the_incident_and_the_next_joins_it(ingester, team):
    first = _post(
        ingester,
        cluster="eos",
        job_id="4242",
        run_key="0",
        node="node001",
        exit_code="1",
        file=[_file("rank_0.log", b"rank 0 says hello\n")],
    )
    assert first.status_code == 202, first.content
    body = first.json()
    assert body["created"] is True and body["analysis"] == "settling"
    second = _post(
        ingester,
        cluster="eos",
        job_id="4242",
        run_key="0",
        node="node002",
        file=[_file("rank_8.log", b"rank 8 says hello\n")],
    )
    assert second.status_code == 202
    assert second.json()["incident"] == body["incident"] and second.json()["created"] is False
    incident = Incident.objects.get(code=body["incident"])
    assert (incident.team, incident.cluster, incident.job_id, incident.source) == (
        team,
        "eos",
        "4242",
        "slurm",
    )
    names = set(incident.artifacts.values_list("display_name", flat=True))
    assert names == {"node001/rank_0.log", "node002/rank_8.log"}


def test_a_new_run_of_the_same_job_id_is_a_new_incident(ingester):
    a = _post(ingester, cluster="eos", job_id="7", run_key="0", node="n1")
    b = _post(ingester, cluster="eos", job_id="7", run_key="1", node="n1")
    assert a.json()["incident"] != b.json()["incident"]


def test_the_same_file_posted_twice_is_stored_once_and_answered_200(ingester):
    fields = {"cluster": "eos", "job_id": "55", "node": "n1"}
    first = _post(ingester, **fields, file=[_file("dmesg.txt", b"Xid 79\n")])
    again = _post(ingester, **fields, file=[_file("dmesg.txt", b"Xid 79\n")])
    assert first.status_code == 202
    assert again.status_code == 200
    outcome = again.json()["files"][0]
    assert outcome["status"] == "duplicate"
    assert outcome["artifact"]["code"] == first.json()["files"][0]["artifact"]["code"]
    assert again.json()["analysis"] == "unchanged"


def test_the_controller_record_is_stored_once_and_says_the_job_is_over(ingester):
    record = {
        "job_id": "99",
        "job_name": "llama-70b",
        "job_nodelist": "gpu[001-003],login1",
        "exit_code2": "1:0",
    }
    fields = {
        "cluster": "eos",
        "job_id": "99",
        "stage": "controller",
        "exit_code": "1",
        "job": json.dumps(record),
    }
    first = _post(ingester, **fields)
    assert first.status_code == 202, first.content
    assert first.json()["analysis"] == "requested"
    incident = Incident.objects.get(code=first.json()["incident"])
    assert "llama-70b" in incident.title
    artifact = incident.artifacts.get()
    assert (artifact.display_name, artifact.kind) == ("slurm-job-99.json", "slurm_job")
    # slurmctld restarted and ran the epilog again: same bytes, nothing new.
    again = _post(ingester, **fields)
    assert again.status_code == 200
    assert incident.artifacts.count() == 1
    assert IncidentEvent.objects.filter(incident=incident, kind="slurm.job_end").count() == 1
    from apps.ingest.services import open_for_reading

    with open_for_reading(artifact) as fp:
        stored = json.load(fp)
    assert stored["job_nodes"] == ["gpu001", "gpu002", "gpu003", "login1"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"cluster": "eos"}, "job_id"),
        ({"cluster": "e o s", "job_id": "1"}, "cluster"),
        ({"cluster": "eos", "job_id": "1", "job": "[1, 2]"}, "job"),
        ({"cluster": "eos", "job_id": "1", "job": "{not json"}, "job"),
        ({"cluster": "eos", "job_id": "1", "job": '{"job_nodelist": "n[1-"}'}, "job"),
    ],
)
def test_bad_fields_are_a_400_naming_the_field(ingester, fields, field):
    response = _post(ingester, **fields)
    assert response.status_code == 400
    assert field in response.json()
    assert Incident.objects.count() == 0


def test_a_read_token_cannot_ingest_and_an_outsider_token_lands_in_its_own_team(
    reader, intruder, other_team, incident
):
    assert _post(reader, cluster="eos", job_id=incident.job_id).status_code == 403
    # Same cluster and job id as our incident: the outsider's post opens its own incident.
    response = _post(intruder, cluster="eos", job_id=incident.job_id, run_key="")
    assert response.status_code == 202
    assert response.json()["incident"] != incident.code
    assert Incident.objects.get(code=response.json()["incident"]).team == other_team


def test_idempotency_key_replays_the_ingest_answer(ingester):
    headers = {"HTTP_IDEMPOTENCY_KEY": "epilog-eos-1-node1"}
    first = ingester.post(URL, {"cluster": "eos", "job_id": "1", "node": "n1"}, **headers)
    second = ingester.post(URL, {"cluster": "eos", "job_id": "1", "node": "n1"}, **headers)
    assert first.status_code == second.status_code == 202
    assert second.json() == first.json()
    assert second["Idempotent-Replayed"] == "true"


def test_hundreds_of_nodes_posting_at_once_make_one_incident_and_store_each_file_once(
    live_server, transactional_db, team
):
    from apps.accounts.services import api_token_create

    _, token = api_token_create(team=team, name="epilog", scope="ingest", actor=None)
    nodes = 64
    start = threading.Barrier(nodes)
    results: list[tuple[int, dict]] = []
    lock = threading.Lock()

    def node(i: int) -> None:
        body = f"node {i} rank log\n".encode() * 100
        files = [("file", (f"rank_{i}.log", body)), ("file", ("common.txt", b"same everywhere\n"))]
        start.wait()
        # The test server's listen backlog is small (gunicorn's is 2048): retry refused
        # connections the way the epilog's curl does, with the same Idempotency-Key.
        for attempt in range(10):
            try:
                response = requests.post(
                    f"{live_server.url}{URL}",
                    data={"cluster": "eos", "job_id": "31337", "run_key": "0", "node": f"n{i:03d}"},
                    files=files,
                    headers={"Authorization": f"Bearer {token}", "Idempotency-Key": f"n{i}"},
                    timeout=60,
                )
                break
            except requests.ConnectionError:
                time.sleep(0.05 * (attempt + 1))
        with lock:
            results.append((response.status_code, response.json()))

    threads = [threading.Thread(target=node, args=(i,)) for i in range(nodes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted({code for code, _ in results}) == [202]
    assert len({body["incident"] for _, body in results}) == 1
    incident = Incident.objects.get(cluster="eos", job_id="31337")
    assert sum(body["created"] for _, body in results) == 1
    # Each node's common.txt has a different display name but the same bytes: stored once.
    assert incident.artifacts.filter(parse_status__in=["pending", "queued"]).count() >= nodes
    assert incident.artifacts.count() == nodes + 1
    assert incident.artifacts.values("sha256").distinct().count() == nodes + 1
