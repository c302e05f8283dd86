"""Routing (issue 14, part 2): task templates, run queues, and where an action's queue came
from: invocation > run > task > environment > default."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from api.cli.context import Remote
from api.cli.main import main
from api.client import Action, Queue, Task, TaskEnvironment, with_runcontext
from api.store.migrations import SCHEMA_VERSION
from api.store.sql_store import SqlStore
from models.errors import MaxQueuedTimeExceededError
from models.snapshot import Action as ActionModel
from models.snapshot import Container
from tests.api.test_role_matrix import AUTH, _headers
from tests.support.old_files import downgrade
from tests.support.service import Service, service

CONTAINERS = [{"resources": {"cpu": "1"}}]


def _source(svc: Service, action_id: str) -> tuple[str, str]:
    action = svc.ok("GET", f"/actions/{action_id}")
    return action["queue"], action["queue_source"]


def test_the_most_specific_level_wins(svc: Service) -> None:
    """Seed: "The queue parameter can be set at three levels: on the flyte.TaskEnvironment, on
    the @env.task decorator, and at invocation time via task.override(). The more specific
    level always wins" and "Anything you don't explicitly route goes to the default queue." """
    for name in ("env-q", "task-q", "run-q", "call-q", "pool-q"):
        svc.ok("POST", "/queues", {"name": name}, status=201)
    svc.ok("PUT", "/environments/pool", {"queue": "pool-q", "resources": {"cpu": "1"}}, 201)
    svc.ok("POST", "/tasks", {"name": "bare", "containers": CONTAINERS}, status=201)
    env_only = {"name": "in-env", "containers": CONTAINERS, "environment_queue": "env-q"}
    svc.ok("POST", "/tasks", env_only, status=201)
    svc.ok("POST", "/tasks", {**env_only, "name": "pinned", "queue": "task-q"}, status=201)
    svc.ok("POST", "/tasks", {"name": "pooled", "environment": "pool"}, status=201)

    svc.ok("POST", "/actions", {"id": "a-default", "task": "bare"}, status=201)
    svc.ok("POST", "/actions", {"id": "a-env", "task": "in-env"}, status=201)
    svc.ok("POST", "/actions", {"id": "a-pool", "task": "pooled"}, status=201)
    svc.ok("POST", "/actions", {"id": "a-task", "task": "pinned"}, status=201)
    first = {"id": "a-run", "run": "r1", "task": "pinned", "run_queue": "run-q"}
    svc.ok("POST", "/actions", first, status=201)
    svc.ok("POST", "/actions", {"id": "a-run-later", "run": "r1", "task": "pinned"}, status=201)
    call = {"id": "a-call", "run": "r1", "task": "pinned", "queue": "call-q"}
    svc.ok("POST", "/actions", call, status=201)
    svc.ok("POST", "/actions", {"id": "plain", "containers": CONTAINERS}, status=201)
    assert _source(svc, "a-default") == ("default", "default")
    assert _source(svc, "a-env") == ("env-q", "environment")
    assert _source(svc, "a-pool") == ("pool-q", "environment")
    assert _source(svc, "a-task") == ("task-q", "task")
    assert _source(svc, "a-run") == ("run-q", "run")
    assert _source(svc, "a-run-later") == ("run-q", "run")
    assert _source(svc, "a-call") == ("call-q", "invocation")
    assert _source(svc, "plain") == ("default", "default")
    assert svc.ok("GET", "/actions/a-pool")["environment"] == "pool"
    assert svc.ok("GET", "/actions/a-task")["containers"][0]["resources"] == {"cpu": "1"}


def test_a_run_keeps_the_queue_it_was_created_with(svc: Service) -> None:
    """Seed: "You can also choose a queue when you launch a run, without touching the task
    definition" — one queue per run: another one later is refused."""
    svc.ok("POST", "/queues", {"name": "run-q"}, status=201)
    svc.ok("POST", "/queues", {"name": "other"}, status=201)
    first = {"id": "r-1", "run": "r", "containers": CONTAINERS, "run_queue": "run-q"}
    svc.ok("POST", "/actions", first, status=201)
    again = {"id": "r-2", "run": "r", "containers": CONTAINERS, "run_queue": "other"}
    refused = svc.http.post("/actions", json=again)
    assert refused.json()["code"] == "FAILED_PRECONDITION", refused.text
    assert "created on queue run-q" in refused.json()["message"]
    svc.ok("GET", "/actions/r-2", status=404)  # the refusal stored nothing


def test_rights_are_checked_on_the_resolved_queue(tmp_path: Path) -> None:
    """Seed: "you don't change your task code, you just say where it should be scheduled" —
    and a submitter may submit only where the queue the action resolves to is one of theirs."""
    auth = tmp_path / "tokens.yaml"
    auth.write_text(AUTH)
    with service(tmp_path, auth_file=auth) as svc:
        admin = _headers("admin")
        for name in ("research", "inference-eval"):
            assert svc.http.post("/queues", json={"name": name}, headers=admin).status_code == 201
        theirs = {"name": "theirs", "containers": CONTAINERS, "queue": "inference-eval"}
        assert svc.http.post("/tasks", json=theirs, headers=admin).status_code == 201
        mine = _headers("own submitter")
        refused = svc.http.post("/actions", json={"task": "theirs"}, headers=mine)
        assert refused.status_code == 403, refused.text
        assert "on queue inference-eval" in refused.json()["message"]
        routed = {"task": "theirs", "queue": "research"}
        assert svc.http.post("/actions", json=routed, headers=mine).status_code == 201
        no_queue = {"name": "anywhere", "containers": CONTAINERS}
        assert svc.http.post("/tasks", json=no_queue, headers=mine).status_code == 403
        assert svc.http.post("/tasks", json=theirs | {"name": "x"}, headers=mine).status_code == 403


@pytest.mark.service(period_s=0.05)
def test_the_seed_fallback_pattern(svc: Service) -> None:
    """Seed: "When max_queued_time fires, the parent task receives
    flyte.errors.MaxQueuedTimeExceededError. Catching it and re-running the task with
    override(queue=..., resources=...) lets a workflow fall back to another queue" """
    client = svc.client()
    Queue.create("gpu-pool", max_resources={"cpu": "2"}, client=client)
    Action.submit(queue="gpu-pool", id="hog", resources={"cpu": "2"}, client=client)
    env = TaskEnvironment("my_env", queue="default-pool", client=client)
    Queue.create("default-pool", client=client)

    @env.task(queue="gpu-pool", resources={"cpu": "2"}, max_queued_time="0.3s")
    def train_model() -> None: ...

    @env.task
    def preprocess() -> None: ...

    assert Task.get("preprocess", client=client)["environment_queue"] == "default-pool"
    first = train_model.submit()
    assert (first["queue"], first["queue_source"]) == ("gpu-pool", "task")
    with pytest.raises(MaxQueuedTimeExceededError):
        Action.wait(first["id"], timeout_s=10, client=client)
    retry = train_model.override(queue="default", resources={"cpu": "1"}).submit()
    assert (retry["queue"], retry["queue_source"]) == ("default", "invocation")
    ran = Action.wait(retry["id"], timeout_s=10, client=client)
    assert ran["state"] == "scheduled"
    assert ran["containers"][0]["resources"] == {"cpu": "1"}
    ids = with_runcontext(queue="default-pool", client=client).run(preprocess, count=10)
    assert len(ids) == 10
    routed = {Action.get(one, client=client)["queue_source"] for one in ids}
    assert routed == {"run"}


def test_the_cli_creates_tasks_and_submits_them(svc: Service) -> None:
    """Issue 14: "CLI equivalents (`sluice create task`, `sluice submit --task T [--run R]
    [--queue Q]`)." Seed: "Targeting a queue is a single parameter" """
    client = svc.client()

    def cli(*args: str) -> str:
        result = CliRunner().invoke(main, list(args), obj=Remote(connection=client))
        assert result.exit_code == 0, result.output
        return result.stdout

    Queue.create("gpu-pool", client=client)
    Queue.create("batch", client=client)
    shown = cli("create", "task", "train", "--resources", "cpu=2", "--queue", "gpu-pool")
    assert "task train: queue gpu-pool" in shown
    assert "train" in cli("get", "tasks")
    (one,) = cli("submit", "--task", "train").split()
    assert "queue from: task" in cli("get", "action", one)
    (two,) = cli("submit", "--task", "train", "--run", "r7", "--run-queue", "batch").split()
    assert Action.get(two, client=client)["queue"] == "batch"
    (three,) = cli("submit", "--task", "train", "--run", "r7").split()
    assert Action.get(three, client=client)["queue_source"] == "run"
    (four,) = cli("submit", "--task", "train", "--queue", "default").split()
    assert "queue default" in cli("get", "action", four)
    assert "task train deleted" in cli("delete", "task", "train")
    assert cli("get", "tasks").strip().count("\n") == 0


def test_a_version_3_file_is_upgraded(tmp_path: Path) -> None:
    """New tables and a column through the store's schema versioning: a version 3 file gains
    them, and its actions show no queue source (it was not kept then)."""
    path = tmp_path / "old.db"
    old = SqlStore(path)
    now = ActionModel(id="x", submitted_at="2026-01-01T00:00:00Z", containers=[Container()])
    old.submit([now])
    old.close()
    downgrade(path, 3)
    upgraded = SqlStore(path)
    try:
        assert upgraded.list_tasks() == []
        assert upgraded.run_queue("x") is None
        assert upgraded.get_action("x").queue_source is None
    finally:
        upgraded.close()
    with sqlite3.connect(path) as conn:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    assert version == (str(SCHEMA_VERSION),)
