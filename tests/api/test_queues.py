"""Queues over HTTP: create, partial update, metrics, list, drain, delete."""

from __future__ import annotations

from tests.support.service import Service

RESEARCH = {
    "name": "research",
    "pool": "gpu-pool",
    "run_concurrency": 100,
    "action_concurrency": 1000,
    "max_resources": {"cpu": "512", "memory": "4Ti"},
    "max_gpus": 8,
    "max_accelerators": {"H100": 48},
    "scheduling": "greedy_capacity",
}

SEED_METRICS = (
    "in_flight_resources",
    "max_resources",
    "accelerator_charges",
    "max_gpus",
    "max_accelerators",
    "scheduling",
    "head_blocked",
    "head_blocked_since",
)


def _action(action_id: str, queue: str, cpu: str = "2", gpu: str | int | None = None) -> dict:
    container: dict = {"resources": {"cpu": cpu, "memory": "1Gi"}}
    if gpu is not None:
        container["gpu"] = gpu
    return {"id": action_id, "queue": queue, "containers": [container]}


def test_create_stores_canonical_caps_and_reports_seed_metrics(svc: Service) -> None:
    """Seed: "The queue stores and prints the canonical name, for example
    nvidia_gpu/nvidia-h100." and `Queue.details` returns the seed's metric names."""
    created = svc.ok("POST", "/queues", RESEARCH, status=201)
    assert created["max_accelerators"] == {"nvidia_gpu/nvidia-h100": 48}
    assert created["max_resources"] == {"cpu": "512", "memory": "4Ti"}
    details = svc.ok("GET", "/queues/research")
    for name in (*SEED_METRICS, "depth_used", "waiting"):
        assert name in details
    assert details["max_gpus"] == 8
    assert details["head_blocked"] is False


def test_default_queue_always_exists(svc: Service) -> None:
    """Seed: "Anything you don't explicitly route goes to the default queue." """
    assert svc.ok("GET", "/queues/default")["name"] == "default"
    status, body = svc.error("DELETE", "/queues/default")
    assert (status, body["code"]) == (409, "FAILED_PRECONDITION")


def test_update_is_partial_and_clears_caps(svc: Service) -> None:
    """Seed: `Queue.update("research", max_resources={})`, `clear_max_gpus=True` and
    `max_accelerators={}` remove the caps; other settings stay."""
    svc.ok("POST", "/queues", RESEARCH, status=201)
    queue = svc.ok("PATCH", "/queues/research", {"max_resources": {"cpu": "768", "memory": "6Ti"}})
    assert queue["max_resources"] == {"cpu": "768", "memory": "6Ti"}
    assert queue["max_gpus"] == 8 and queue["run_concurrency"] == 100
    queue = svc.ok("PATCH", "/queues/research", {"max_accelerators": {"H100": 64, "T4": 32}})
    assert queue["max_accelerators"] == {
        "nvidia_gpu/nvidia-h100": 64,
        "nvidia_gpu/nvidia-t4": 32,
    }
    queue = svc.ok("PATCH", "/queues/research", {"max_resources": {}})
    assert queue["max_resources"] == {}
    queue = svc.ok("PATCH", "/queues/research", {"max_gpus": None})
    assert queue["max_gpus"] is None
    queue = svc.ok("PATCH", "/queues/research", {"max_accelerators": {}})
    assert queue["max_accelerators"] == {}
    queue = svc.ok("PATCH", "/queues/research", {"scheduling": "strict_fifo"})
    assert queue["scheduling"] == "strict_fifo"
    assert queue["action_concurrency"] == 1000


def test_bad_input_names_the_field(svc: Service) -> None:
    """Every error is JSON with a code and a message that names the field."""
    status, body = svc.error("POST", "/queues", {"name": "q", "max_resources": {"cpu": "lots"}})
    assert status == 400 and body["code"] == "INVALID_ARGUMENT"
    assert body["field"].startswith("max_resources")
    assert "max_resources.cpu" in body["message"] and "'lots'" in body["message"]
    status, body = svc.error("POST", "/queues", {"name": "q", "max_accelerators": {"Z9": 1}})
    assert body["code"] == "INVALID_ARGUMENT" and "unknown device 'Z9'" in body["message"]
    status, body = svc.error("POST", "/queues", {"name": "q", "max_gpu": 3})
    assert body == {
        "code": "INVALID_ARGUMENT",
        "message": "max_gpu: Extra inputs are not permitted",
        "field": "max_gpu",
    }
    status, body = svc.error("POST", "/queues", {"name": "q", "clusters": ["nowhere"]})
    assert body["field"] == "clusters" and "'nowhere'" in body["message"]
    status, body = svc.error("PATCH", "/queues/q", {"depth": 3})
    assert (status, body["code"]) == (404, "NOT_FOUND")


def test_create_twice_is_already_exists(svc: Service) -> None:
    svc.ok("POST", "/queues", RESEARCH, status=201)
    status, body = svc.error("POST", "/queues", RESEARCH)
    assert (status, body["code"], body["field"]) == (409, "ALREADY_EXISTS", "name")


def test_delete_only_when_empty(svc: Service) -> None:
    """Issue: delete (only when empty)."""
    svc.ok("POST", "/queues", {"name": "scratch"}, status=201)
    svc.ok("POST", "/actions", _action("a1", "scratch"), status=201)
    status, body = svc.error("DELETE", "/queues/scratch")
    assert (status, body["code"]) == (409, "FAILED_PRECONDITION")
    assert "1 actions are waiting or in flight" in body["message"]
    svc.ok("POST", "/actions/a1/cancel")
    svc.ok("DELETE", "/queues/scratch", status=204)
    assert svc.error("GET", "/queues/scratch")[0] == 404


def test_drain_accepts_nothing_new_and_finishes_what_is_there(svc: Service) -> None:
    """Issue: drain (accept nothing new, finish what is there)."""
    svc.ok("POST", "/queues", {"name": "batch"}, status=201)
    svc.ok("POST", "/actions", _action("held", "batch"), status=201)
    assert svc.ok("POST", "/queues/batch/drain")["draining"] is True
    status, body = svc.error("POST", "/actions", _action("late", "batch"))
    assert (status, body["code"]) == (409, "QUEUE_DRAINING")
    svc.tick()
    assert svc.ok("GET", "/actions/held")["state"] == "scheduled"
    svc.ok("POST", "/queues/batch/undrain")
    svc.ok("POST", "/actions", _action("late", "batch"), status=201)


def test_raised_cap_applies_at_the_next_tick(svc: Service) -> None:
    """Seed: "If you raise a cap, waiting actions are scheduled as soon as they fit." and
    "A cap limits the total resources requested by the actions a queue has scheduled and
    that have not finished." """
    svc.ok("POST", "/queues", {"name": "small", "max_resources": {"cpu": "2"}}, status=201)
    svc.ok("POST", "/actions", _action("first", "small"), status=201)
    svc.ok("POST", "/actions", _action("second", "small"), status=201)
    svc.tick()
    assert svc.ok("GET", "/actions/first")["state"] == "scheduled"
    second = svc.ok("GET", "/actions/second")
    assert second["state"] == "queued"
    assert (second["waiting_reason"], second["waiting_resource"]) == ("queue_cap", "cpu")
    queue = svc.ok("GET", "/queues/small")
    assert queue["in_flight_resources"]["cpu"] == "2"
    assert (queue["waiting"], queue["depth_used"], queue["running_actions"]) == (1, 2, 1)
    svc.ok("PATCH", "/queues/small", {"max_resources": {"cpu": "4"}})
    svc.tick()
    assert svc.ok("GET", "/actions/second")["state"] == "scheduled"
    assert svc.ok("GET", "/queues/small")["in_flight_resources"]["cpu"] == "4"


def test_list_filters_by_pool(svc: Service) -> None:
    svc.ok("POST", "/queues", RESEARCH, status=201)
    svc.ok("POST", "/queues", {"name": "inference-eval", "pool": "gpu-pool"}, status=201)
    names = [q["name"] for q in svc.ok("GET", "/queues")]
    assert names == ["default", "inference-eval", "research"]
    names = [q["name"] for q in svc.ok("GET", "/queues?pool=gpu-pool")]
    assert names == ["inference-eval", "research"]
