"""Quota-managed job queues through the service: REST API, Python client, CLI, store.

Issue "Quota shares", Interfaces: "Scenario files, snapshots, the service API, the client
and the CLI all carry job queues with shares, next to the capped queues, with the same
conventions. The seed's example is a fixture: three shares, each max 1 of ml.g5.xlarge, in
an environment of max 3, with strategies LEND_AND_BORROW, LEND and RESERVE; tests show who
can borrow what, and what is preempted when a lender's jobs arrive."
"""

from __future__ import annotations

import copy
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from api.cli.context import Remote
from api.cli.main import main
from api.client import Job, JobQueue, QuotaShare, SchedulingPolicy, ServiceEnvironment
from api.store.migrations import SCHEMA_VERSION
from api.store.records import Listing
from api.store.sql_store import SqlStore
from models.arrow.tables import read_snapshot_stream
from models.errors import FailedPrecondition
from tests.support.metrics import value
from tests.support.old_files import downgrade
from tests.support.quota_builders import G5, P3, SEED_FIXTURE
from tests.support.service import Service

# Every test here sets up its own fleet of job queues: the service starts without a cluster.
pytestmark = pytest.mark.service(cluster=None)

POLICY = {"quota_share_policy": {"idle_resource_assignment_strategy": "FIFO"}}
SEED_QUEUE: dict[str, Any] = {
    "name": "training",
    "scheduling_policy": "quota-policy",
    "service_environment": "sagemaker-g5",
    "quota_shares": [
        {"name": "project-a", "capacity_limits": {G5: 1}, "strategy": "LEND_AND_BORROW"},
        {"name": "project-b", "capacity_limits": {G5: 1}, "strategy": "LEND"},
        {"name": "project-c", "capacity_limits": {G5: 1}, "strategy": "RESERVE"},
    ],
}


def _seed_fleet(svc: Service, status: int = 201) -> None:
    """The seed's policy and environment: "een maximale capaciteit van 3" for ml.g5.xlarge
    (`status` 201 when the PUTs create them, 200 when they replace them)."""
    svc.ok("PUT", "/scheduling-policies/quota-policy", POLICY, status)
    svc.ok("PUT", "/service-environments/sagemaker-g5", {"capacity_limits": {G5: 3}}, status)


@pytest.fixture
def seed_job_queue(svc: Service) -> None:
    """The seed's job queue `training` on its policy and environment."""
    _seed_fleet(svc)
    svc.ok("POST", "/job-queues", SEED_QUEUE, status=201)


def _submit(svc: Service, job_id: str, share: str, **fields: Any) -> dict[str, Any]:
    body = {"id": job_id, "job_queue": "training", "share": share, "instance_type": G5}
    return svc.ok("POST", "/jobs", body | fields, status=201)


def _share(queue: dict[str, Any], name: str) -> dict[str, Any]:
    return next(share for share in queue["shares"] if share["name"] == name)


# --- create, validation, status ---------------------------------------------------------------


def _with_share(index: int, **fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        body["quota_shares"][index].update(fields)

    return change


def _shares(count: int) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        first = body["quota_shares"][0]
        body["quota_shares"] = [{**first, "name": f"s-{i}"} for i in range(count)]

    return change


def _set(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda body: body.update(fields)


BAD_CREATES: list[tuple[str, Callable[[dict[str, Any]], None], int, str, str]] = [
    ("21 shares", _shares(21), 400, "quota_shares", "1 to 20 quota shares, not 21"),
    (
        "no capacity limits",
        _with_share(0, capacity_limits={}),
        400,
        "quota_shares.0.capacity_limits",
        "1 to 5 capacity limits, not 0",
    ),
    (
        "six capacity limits",
        _with_share(
            0,
            capacity_limits={
                t: 1
                for t in (G5, P3, "ml.g5.2xlarge", "ml.m5.large", "ml.c5.xlarge", "ml.t3.medium")
            },
        ),
        400,
        "quota_shares.0.capacity_limits",
        "1 to 5 capacity limits, not 6",
    ),
    (
        "an instance type SageMaker does not have",
        _with_share(1, capacity_limits={"ml.g5.huge": 1}),
        400,
        "quota_shares.1.capacity_limits.ml.g5.huge",
        "is not an instance type SageMaker Training supports",
    ),
    (
        "a limit by NUM_INSTANCES",
        _with_share(2, capacity_limits={"NUM_INSTANCES": 1}),
        400,
        "quota_shares.2.capacity_limits.NUM_INSTANCES",
        "a capacity limit by NUM_INSTANCES is not accepted",
    ),
    (
        "a borrow limit on a LEND share",
        _with_share(1, borrow_limit=50),
        400,
        "quota_shares.1.borrow_limit",
        "has strategy LEND, which does not borrow",
    ),
    (
        "a borrow limit on a RESERVE share",
        _with_share(2, borrow_limit=50),
        400,
        "quota_shares.2.borrow_limit",
        "has strategy RESERVE, which does not borrow",
    ),
    (
        "an unknown strategy",
        _with_share(0, strategy="SHARE"),
        400,
        "quota_shares.0.strategy",
        "LEND_AND_BORROW",
    ),
    (
        "a share name twice",
        _with_share(1, name="project-a"),
        400,
        "quota_shares",
        "quota share 'project-a' appears twice",
    ),
    (
        "an instance type the environment does not offer",
        _with_share(0, capacity_limits={P3: 1}),
        400,
        "quota_shares.0.capacity_limits.ml.p3.2xlarge",
        "which service environment sagemaker-g5 does not offer (ml.g5.xlarge)",
    ),
    (
        "an unknown scheduling policy",
        _set(scheduling_policy="nope"),
        404,
        "scheduling_policy",
        "scheduling policy 'nope' does not exist",
    ),
    (
        "a policy without a quota share policy",
        _set(scheduling_policy="plain"),
        400,
        "scheduling_policy",
        "has no quota_share_policy",
    ),
    (
        "an environment another job queue has",
        _set(name="second", service_environment="taken"),
        400,
        "service_environment",
        "already attached to job queue other",
    ),
]


def test_create_refuses_every_seed_limit_naming_the_field(svc: Service) -> None:
    """ "Every limit in the seed is validated with a clear error (21 shares, 0 or 6 limits, an
    unsupported instance type, a borrow limit on a non-borrowing share)." """
    _seed_fleet(svc)
    svc.ok("PUT", "/scheduling-policies/plain", {}, status=201)
    svc.ok("PUT", "/service-environments/taken", {"capacity_limits": {G5: 1}}, status=201)
    other = {**copy.deepcopy(SEED_QUEUE), "name": "other", "service_environment": "taken"}
    svc.ok("POST", "/job-queues", other, status=201)
    for case, change, status, field, fragment in BAD_CREATES:
        body = copy.deepcopy(SEED_QUEUE)
        change(body)
        code, error = svc.error("POST", "/job-queues", body)
        expected_code = "NOT_FOUND" if status == 404 else "INVALID_ARGUMENT"
        assert (code, error["code"], error.get("field")) == (status, expected_code, field), case
        assert fragment in error["message"], (case, error["message"])
    # The environment's own limits are checked as well.
    code, error = svc.error(
        "PUT", "/service-environments/bad", {"capacity_limits": {"NUM_INSTANCES": 3}}
    )
    assert (code, error["field"]) == (400, "capacity_limits.NUM_INSTANCES")
    assert [q["name"] for q in svc.ok("GET", "/job-queues")] == ["other"]
    created = svc.ok("POST", "/job-queues", SEED_QUEUE, status=201)
    code, error = svc.error("POST", "/job-queues", SEED_QUEUE)
    assert (code, error["code"], error["field"]) == (409, "ALREADY_EXISTS", "name")
    assert (created["state"], created["status"], created["reason"]) == (
        "ENABLED",
        "VALID",
        "JobQueue Healthy",
    )


@pytest.mark.usefixtures("seed_job_queue")
def test_status_turns_invalid_with_its_reason_and_back(svc: Service) -> None:
    """ "The job queue reports state ENABLED, status VALID and reason "JobQueue Healthy" when it
    is consistent, and INVALID with the reason otherwise." """
    svc.ok("PUT", "/service-environments/sagemaker-g5", {"capacity_limits": {P3: 3}})
    svc.ok("PUT", "/scheduling-policies/quota-policy", {})
    queue = svc.ok("GET", "/job-queues/training")
    assert (queue["state"], queue["status"]) == ("ENABLED", "INVALID")
    assert "has no quota_share_policy" in queue["reason"]
    assert (
        "quota share project-a limits ml.g5.xlarge, which service environment" in (queue["reason"])
    )
    _submit(svc, "a-1", "project-a")
    svc.tick()
    job = svc.ok("GET", "/jobs/a-1")
    assert (job["state"], job["waiting_reason"]) == ("QUEUED", "job_queue_not_ready")
    metrics = svc.http.get("/metrics").text
    assert value(metrics, "sluice_job_queue_valid", job_queue="training") == 0
    _seed_fleet(svc, status=200)
    assert svc.ok("GET", "/job-queues/training")["reason"] == "JobQueue Healthy"
    svc.tick()
    assert svc.ok("GET", "/jobs/a-1")["state"] == "SCHEDULED"


# --- the seed's example through ticks -----------------------------------------------------------


def test_seed_example_borrow_reclaim_and_back_in_line(svc: Service) -> None:
    """Who can borrow what, and what is preempted when a lender's job arrives; the preempted
    job is back in its share's line at its arrival place ("met de oorspronkelijke
    aankomstvolgorde") and is the next to run."""
    client = svc.client()
    SchedulingPolicy.put("quota-policy", client=client)
    ServiceEnvironment.put("sagemaker-g5", {G5: 3}, client=client)
    JobQueue.create(
        "training",
        scheduling_policy="quota-policy",
        service_environment="sagemaker-g5",
        quota_shares=[
            QuotaShare.spec("project-a", {G5: 1}, "LEND_AND_BORROW"),
            QuotaShare.spec("project-b", {G5: 1}, "LEND"),
            QuotaShare.spec("project-c", {G5: 1}, "RESERVE"),
        ],
        client=client,
    )
    for job_id in ("a-1", "a-2"):  # one tick each: a-1 has more work done than a-2
        Job.submit(
            job_queue="training", share="project-a", instance_type=G5, id=job_id, client=client
        )
        svc.tick()
        Job.report(job_id, "started", client=client)
    queue = JobQueue.details("training", client=client)
    a, b, c = (_share(queue, name) for name in ("project-a", "project-b", "project-c"))
    # project-a borrows project-b's idle instance (LEND); project-c's (RESERVE) is never lent.
    assert (a["usage"], a["borrowed"], b["lent"], c["lent"]) == (
        {G5: 2},
        {G5: 1},
        {G5: 1},
        {G5: 0},
    )
    _submit(svc, "a-3", "project-a")
    svc.tick()
    waiting = svc.ok("GET", "/jobs/a-3")
    assert (waiting["waiting_reason"], waiting["position"]) == ("no_idle_capacity", 0)

    b1 = _submit(svc, "b-1", "project-b")  # the lender's job arrives
    svc.tick()
    assert svc.ok("GET", "/jobs/b-1")["state"] == "SCHEDULED"
    assert svc.ok("GET", "/jobs/a-1")["state"] == "RUNNING"  # more work done: kept
    preempted = svc.ok("GET", "/jobs/a-2")
    assert (preempted["state"], preempted["preemptions"], preempted["position"]) == (
        "QUEUED",
        1,
        0,
    )
    last = preempted["last_preemption"]
    assert (last["reason"], last["beneficiary"]) == ("reclaim", "b-1")
    queue = JobQueue.details("training", client=client)
    assert [(p["job"], p["reason"], p["beneficiary"]) for p in queue["preempted"]] == [
        ("a-2", "reclaim", "b-1")
    ]
    assert _share(queue, "project-a")["line"] == ["a-2", "a-3"]
    assert (_share(queue, "project-a")["borrowed"], _share(queue, "project-b")["lent"]) == (
        {G5: 0},
        {G5: 0},
    )
    # The executor running a-2 learns it must stop.
    with pytest.raises(FailedPrecondition, match=r"job a-2 is QUEUED \(preempted at"):
        Job.report("a-2", "succeeded", client=client)

    Job.report("b-1", "started", client=client)
    Job.report("b-1", "succeeded", client=client)
    svc.tick()
    again = svc.ok("GET", "/jobs/a-2")  # next in line: ahead of a-3, which arrived later
    assert again["state"] == "SCHEDULED"
    assert again["submitted_at"] == preempted["submitted_at"]
    assert svc.ok("GET", "/jobs/a-3")["state"] == "QUEUED"
    assert b1["submitted_at"] > again["submitted_at"]
    metrics = svc.http.get("/metrics").text
    share_a = {"job_queue": "training", "share": "project-a"}
    kind = {"instance_type": "ml.g5.xlarge"}
    assert value(metrics, "sluice_quota_share_borrowed", **share_a, **kind) == 1
    assert value(metrics, "sluice_quota_share_jobs", **share_a, state="queued") == 1
    assert value(metrics, "sluice_preemptions_total", job_queue="training") == 1
    # The service's snapshot (GET /snapshot, Arrow) carries the job queues too.
    snapshot = read_snapshot_stream(svc.http.get("/snapshot").content)
    assert [q.name for q in snapshot.job_queues] == ["training"]
    held = [(j.id, j.state.value) for j in snapshot.jobs if j.state.holds_capacity]
    assert held == [("a-1", "RUNNING"), ("a-2", "SCHEDULED")]


@pytest.mark.usefixtures("seed_job_queue")
def test_in_share_preemption_and_lowered_limits_through_the_api(svc: Service) -> None:
    """ "a higher-priority job may displace lower-priority jobs of the same share"; turned on
    with a share update, as is a lowered limit."""
    _submit(svc, "c-low", "project-c", priority=1)
    svc.tick()
    _submit(svc, "c-high", "project-c", priority=9)
    svc.tick()
    assert svc.ok("GET", "/jobs/c-high")["waiting_reason"] == "share_limit"
    QuotaShare.update("training", "project-c", in_share_preemption=True, client=svc.client())
    svc.tick()
    assert svc.ok("GET", "/jobs/c-high")["state"] == "SCHEDULED"
    low = svc.ok("GET", "/jobs/c-low")
    assert (low["state"], low["last_preemption"]["reason"]) == ("QUEUED", "in_share_priority")
    assert low["last_preemption"]["beneficiary"] == "c-high"
    code, error = svc.error(
        "PATCH",
        "/job-queues/training/shares/project-a",
        {"borrow_limit": 50, "strategy": "LEND"},
    )
    assert (code, error["field"]) == (400, "borrow_limit")
    code, error = svc.error("DELETE", "/job-queues/training/shares/project-c")
    assert (code, error["code"], error["field"]) == (409, "FAILED_PRECONDITION", "quota_shares")
    queue = svc.ok(
        "PUT",
        "/job-queues/training/shares/project-d",
        {"capacity_limits": {G5: 0}, "strategy": "LEND_AND_BORROW", "borrow_limit": 100},
        status=201,
    )
    assert [s["name"] for s in queue["shares"]][-1] == "project-d"


@pytest.mark.usefixtures("seed_job_queue")
def test_a_starting_job_holds_its_instances_and_can_be_preempted(svc: Service) -> None:
    """ "Within a share, optional preemption lets higher-priority jobs displace lower-priority
    jobs that are SCHEDULED, STARTING or RUNNING." Issue 14: "The service has no STARTING phase
    for jobs, though in-share preemption names SCHEDULED, STARTING or RUNNING." """
    client = svc.client()
    _submit(svc, "c-low", "project-c", priority=1)
    svc.tick()
    assert Job.report("c-low", "starting", client=client)["state"] == "STARTING"
    with pytest.raises(FailedPrecondition, match="only SCHEDULED jobs can be reported starting"):
        Job.report("c-low", "starting", client=client)
    share = _share(JobQueue.details("training", client=client), "project-c")
    assert (share["scheduled"], share["starting"], share["running"]) == (0, 1, 0)
    project_c = {"job_queue": "training", "share": "project-c"}
    metrics = svc.http.get("/metrics").text
    assert value(metrics, "sluice_quota_share_jobs", **project_c, state="starting") == 1
    snapshot = read_snapshot_stream(svc.http.get("/snapshot").content)
    assert [(j.id, j.state.value) for j in snapshot.jobs] == [("c-low", "STARTING")]
    code, out, _ = _cli(svc, "get jobs --state STARTING")
    assert code == 0 and "c-low" in out and "STARTING" in out

    QuotaShare.update("training", "project-c", in_share_preemption=True, client=client)
    _submit(svc, "c-high", "project-c", priority=9)
    svc.tick()
    low = Job.get("c-low", client=client)
    assert (low["state"], low["last_preemption"]["reason"]) == ("QUEUED", "in_share_priority")
    with pytest.raises(FailedPrecondition, match=r"job c-low is QUEUED \(preempted at"):
        Job.report("c-low", "started", client=client)
    # `starting` is optional: started follows either step.
    assert Job.report("c-high", "starting", client=client)["state"] == "STARTING"
    assert Job.report("c-high", "started", client=client)["state"] == "RUNNING"
    assert Job.report("c-high", "succeeded", client=client)["state"] == "SUCCEEDED"


def test_an_action_has_no_starting_report(svc: Service) -> None:
    """Only jobs have the STARTING step (D141): the actions' report body does not take it."""
    code, error = svc.error("POST", "/actions/any/report", {"outcome": "starting"})
    assert (code, error["code"], error["field"]) == (400, "INVALID_ARGUMENT", "outcome")


@pytest.mark.usefixtures("seed_job_queue")
def test_job_submission_errors_and_failures(svc: Service) -> None:
    cases = [
        ({"job_queue": "nope"}, 404, "job_queue"),
        ({"share": "project-z"}, 404, "share"),
        ({"priority": 10_000}, 400, "priority"),
        ({"count": 0}, 400, "count"),
        ({"instance_type": "NUM_INSTANCES"}, 400, "instance_type"),
    ]
    for change, status, field in cases:
        body = {"job_queue": "training", "share": "project-a", "instance_type": G5} | change
        code, error = svc.error("POST", "/jobs", body)
        assert (code, error["field"]) == (status, field), change
    _submit(svc, "x-1", "project-a")
    code, error = svc.error(
        "POST",
        "/jobs",
        {
            "id": "x-1",
            "job_queue": "training",
            "share": "project-a",
            "instance_type": G5,
        },
    )
    assert (code, error["code"]) == (409, "ALREADY_EXISTS")
    _submit(svc, "p3", "project-a", instance_type=P3)  # not a type of its share
    _submit(svc, "gone", "project-b")
    assert svc.ok("POST", "/jobs/gone/cancel")["state"] == "CANCELLED"
    svc.tick()
    failed = svc.ok("GET", "/jobs/p3")
    assert (failed["state"], failed["code"]) == ("FAILED", "INFEASIBLE")
    assert [j["id"] for j in svc.ok("GET", "/jobs?state=SCHEDULED")] == ["x-1"]
    svc.ok("PATCH", "/job-queues/training", {"state": "DISABLED"})
    code, error = svc.error(
        "POST", "/jobs", {"job_queue": "training", "share": "project-a", "instance_type": G5}
    )
    assert (code, error["code"], error["field"]) == (409, "FAILED_PRECONDITION", "job_queue")


# --- CLI -----------------------------------------------------------------------------------------


def _cli(svc: Service, line: str) -> tuple[int, str, str]:
    """Run one `sluice ...` command line (without `sluice`) against the in-process service."""
    result = CliRunner().invoke(main, line.split(), obj=Remote(connection=svc.client()))
    return result.exit_code, result.stdout, result.stderr


def test_cli_creates_shows_and_submits(svc: Service) -> None:
    """`sluice create job-queue`, `sluice get job-queue NAME` (shares with usage, lent,
    borrowed), `sluice submit-job`."""
    create = (
        "create job-queue training --scheduling-policy quota-policy"
        " --service-environment sagemaker-g5"
        " --share project-a:LEND_AND_BORROW:ml.g5.xlarge=1:borrow-limit=100"
        " --share project-b:LEND:ml.g5.xlarge=1"
        " --share project-c:RESERVE:ml.g5.xlarge=1:in-share-preemption"
    )
    assert _cli(svc, "create scheduling-policy quota-policy")[0] == 0
    environment = "create service-environment sagemaker-g5 --capacity-limit ml.g5.xlarge=3"
    assert _cli(svc, environment)[0] == 0
    code, out, _ = _cli(svc, create)
    assert code == 0, out
    assert "job queue training: ENABLED, VALID (JobQueue Healthy)" in out
    for job_id in ("a-1", "a-2"):
        submit = f"submit-job --job-queue training --share project-a --instance-type {G5}"
        code, out, _ = _cli(svc, f"{submit} --id {job_id}")
        assert (code, out.strip()) == (0, job_id)
    svc.tick()
    code, out, _ = _cli(svc, "get job-queue training")
    assert code == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    # SHARE STRATEGY TYPE LIMIT USED BORROWED LENT BORROW-LIMIT
    assert rows["project-a"][:8] == ["project-a", "LEND_AND_BORROW", G5, "1", "2", "1", "0",
                                     "100%"]  # fmt: skip
    assert rows["project-b"][5:7] == ["0", "1"]  # lent to project-a
    code, out, _ = _cli(svc, "get job-queue")
    assert code == 0 and "training" in out and "ml.g5.xlarge 2/3" in out
    bad = create.replace("training", "bad").replace(
        "LEND:ml.g5.xlarge=1", "LEND:ml.g5.xlarge=1:borrow-limit=5"
    )
    code, _, err = _cli(svc, bad)
    assert code == 1
    assert err.startswith("INVALID_ARGUMENT: quota_shares.1.borrow_limit: quota share project-b")
    code, _, err = _cli(svc, "create job-queue bad --share x:SHARE:ml.g5.xlarge=1")
    assert (code, err.split(":")[0]) == (1, "INVALID_ARGUMENT")
    code, out, _ = _cli(svc, "get job a-2")
    assert code == 0 and "job a-2: SCHEDULED in training/project-a" in out
    help_text = CliRunner().invoke(main, ["submit-job", "--help"]).stdout
    assert "--instance-type" in help_text and "quota share's line" in help_text


def test_apply_puts_the_seed_fixture(svc: Service) -> None:
    """`sluice apply` takes the job queues of a scenario file, like its capped queues."""
    code, out, err = _cli(svc, f"apply {SEED_FIXTURE}")
    assert code == 0, err
    assert "job queue training created" in out
    code, out, err = _cli(svc, f"apply {SEED_FIXTURE}")
    assert "job queue training updated" in out
    assert svc.ok("GET", "/job-queues/training")["status"] == "VALID"


# --- store ---------------------------------------------------------------------------------------


def test_a_schema_1_database_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    SqlStore(path).close()
    downgrade(path, 1)
    store = SqlStore(path)
    try:
        assert store.list_jobs(listing=Listing(limit=1)).items == []  # the jobs table is back
    finally:
        store.close()
    with sqlite3.connect(path) as conn:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        assert version == (str(SCHEMA_VERSION),)


def test_a_schema_4_file_indexes_starting_jobs_as_live(tmp_path: Path) -> None:
    """Schema 5 lets a job be STARTING: a version 4 file's index of live jobs is rebuilt so
    the tick's read of live jobs still uses it."""
    path = tmp_path / "old.db"
    SqlStore(path).close()
    downgrade(path, 4)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE INDEX jobs_live ON jobs (seq) WHERE phase IN ('QUEUED', 'SCHEDULED', 'RUNNING')"
        )
    SqlStore(path).close()
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'jobs'").fetchall()
        indexes = {name for (name,) in rows}
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    assert "jobs_live_phases" in indexes and "jobs_live" not in indexes
    assert version == (str(SCHEMA_VERSION),)
