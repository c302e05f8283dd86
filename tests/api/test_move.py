"""Moving waiting actions between queues (issue 14, part 5): HTTP, client, CLI, the filter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from api.cli.context import Remote
from api.cli.main import main
from api.client import Action, Queue, SluiceClient
from api.moves import MAX_CLAUSES, parse_filter
from models.errors import InvalidInput, PermissionDenied
from models.snapshot import Action as ActionModel
from tests.api.test_role_matrix import AUTH, TOKENS
from tests.support.service import Service, service


def _cli(svc: Service, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), obj=Remote(connection=svc.client()))
    return result.exit_code, result.stdout, result.stderr


def _submit(svc: Service, action_id: str, queue: str, gpus: int = 0, **container: Any) -> None:
    resources = {"cpu": "1", "memory": "1Gi"} | container
    body: dict[str, Any] = {"resources": resources} | ({"gpu": f"H100:{gpus}"} if gpus else {})
    svc.ok("POST", "/actions", {"id": action_id, "queue": queue, "containers": [body]}, 201)


def _ids(svc: Service, queue: str) -> list[str]:
    return [a["id"] for a in svc.ok("GET", f"/actions?queue={queue}")]


def test_move_the_large_jobs_to_their_own_strict_fifo_queue(svc: Service) -> None:
    """Seed: "move the large jobs to their own strict FIFO queue"; issue 14: "`sluice move
    queue SRC --to DST [--where FILTER]` (filters on requests, e.g. `gpu>=8`) move waiting
    actions, keeping their arrival order"."""
    svc.ok("POST", "/queues", {"name": "research", "action_concurrency": 0}, status=201)
    svc.ok("POST", "/queues", {"name": "large", "scheduling": "strict_fifo"}, status=201)
    for index, gpus in enumerate([8, 1, 8, 2, 8]):
        _submit(svc, f"a{index}", "research", gpus)
    svc.tick()  # the tick has read (and cached) them in research
    code, out, err = _cli(svc, "move", "queue", "research", "--to", "large", "--where", "gpu>=8")
    assert code == 0, err
    assert out.splitlines() == ["3 actions moved to queue large", "a0", "a2", "a4"]
    assert _ids(svc, "large") == ["a0", "a2", "a4"] and _ids(svc, "research") == ["a1", "a3"]
    svc.tick()
    moved = svc.ok("GET", "/actions/a0")
    assert (moved["queue"], moved["state"]) == ("large", "scheduled")  # research runs nothing
    assert svc.ok("GET", "/actions/a1")["waiting_reason"] == "action_concurrency"


def test_move_actions_by_id_all_or_none(svc: Service) -> None:
    """Issue 14: "`sluice move action ID... --to QUEUE` ... all or none"."""
    svc.ok("POST", "/queues", {"name": "research"}, status=201)
    svc.ok("POST", "/queues", {"name": "other"}, status=201)
    _submit(svc, "running", "research")
    svc.tick()
    _submit(svc, "w1", "research")
    _submit(svc, "w2", "research")
    code, _, err = _cli(svc, "move", "action", "w2", "running", "w1", "--to", "other")
    assert code == 1
    assert err == (
        "FAILED_PRECONDITION: action running is scheduled; only waiting (queued) actions move\n"
    )
    assert _ids(svc, "other") == []
    client = svc.client()
    assert Action.move(["w2", "w1"], to="other", client=client) == ["w1", "w2"]
    assert _ids(svc, "other") == ["w1", "w2"]
    status, body = svc.error("POST", "/actions/move", {"ids": ["w1"], "to": "other"})
    assert (status, body["code"]) == (409, "FAILED_PRECONDITION")
    assert "in queue other already" in body["message"]
    status, body = svc.error("POST", "/actions/move", {"ids": ["nope"], "to": "research"})
    assert (status, body["code"]) == (404, "NOT_FOUND")


def test_a_destination_whose_caps_make_an_action_infeasible_refuses_the_move(
    svc: Service,
) -> None:
    """Issue 14: "refused with a clear error if the destination's caps make an action
    infeasible"."""
    svc.ok("POST", "/queues", {"name": "research"}, status=201)
    svc.ok("POST", "/queues", {"name": "small", "max_accelerators": {"H100": 4}}, status=201)
    _submit(svc, "fits", "research", 2)
    _submit(svc, "big", "research", 8)
    client = svc.client()
    with pytest.raises(Exception, match="cannot move to queue small: action big") as caught:
        Queue.move("research", to="small", client=client)
    assert caught.value.code.value == "FAILED_PRECONDITION"  # type: ignore[attr-defined]
    assert "nothing was moved" in str(caught.value)
    assert _ids(svc, "small") == []
    assert Queue.move("research", to="small", where="gpu<8", client=client) == ["fits"]
    assert Queue.move("research", to="small", where="gpu<8", client=client) == []


def test_a_destination_that_is_full_or_draining_refuses(svc: Service) -> None:
    svc.ok("POST", "/queues", {"name": "research"}, status=201)
    svc.ok("POST", "/queues", {"name": "tight", "depth": 1}, status=201)
    _submit(svc, "w1", "research")
    _submit(svc, "w2", "research")
    status, body = svc.error("POST", "/queues/research/move", {"to": "tight"})
    assert (status, body["code"]) == (429, "RESOURCE_EXHAUSTED")
    svc.ok("POST", "/queues/tight/drain")
    status, body = svc.error("POST", "/actions/move", {"ids": ["w1"], "to": "tight"})
    assert (status, body["code"]) == (409, "QUEUE_DRAINING")


def test_moving_needs_rights_on_both_queues(tmp_path: Path) -> None:
    """Issue 14: "refused ... if the caller lacks rights on either queue"."""
    auth = tmp_path / "tokens.yaml"
    auth.write_text(AUTH)
    with service(tmp_path, auth_file=auth) as svc:

        def client(who: str) -> SluiceClient:  # one TestClient: set its token per call
            return svc.client(TOKENS[who])

        for name in ("research", "inference-eval", "spare"):
            Queue.create(name, client=client("admin"))
        for action_id, queue in (("mine", "research"), ("theirs", "inference-eval")):
            body = {"id": action_id, "queue": queue, "containers": [{"resources": {"cpu": "1"}}]}
            client("admin").request("POST", "/actions", body=body)
        with pytest.raises(PermissionDenied, match="move actions to on queue spare"):
            Action.move(["mine"], to="spare", client=client("own submitter"))
        with pytest.raises(PermissionDenied, match="move actions from on queue inference-eval"):
            Action.move(["theirs"], to="research", client=client("own submitter"))
        with pytest.raises(PermissionDenied, match="move actions from on queue inference-eval"):
            Queue.move("inference-eval", to="research", client=client("own submitter"))
        assert Action.move(["mine", "theirs"], to="spare", client=client("admin")) == [
            "mine",
            "theirs",
        ]


def _action(*containers: dict[str, Any]) -> ActionModel:
    return ActionModel.model_validate(
        {"id": "a", "submitted_at": "2026-01-01T00:00:00Z", "containers": list(containers)}
    )


def test_the_filter_grammar_is_tiny_and_strict() -> None:
    """Issue 14: "filters on requests, e.g. `gpu>=8`"; the brief: "parse with a tiny, strict
    grammar and bound it"."""
    big = _action(
        {"name": "a", "resources": {"cpu": "8", "memory": "48Gi"}, "gpu": "H100:4"},
        {"name": "b", "resources": {"cpu": "8", "memory": "48Gi"}, "gpu": 4},
    )
    assert parse_filter("gpu>=8")(big) and not parse_filter("gpu>8")(big)
    assert parse_filter("memory>64Gi")(big) and parse_filter("memory>64Gi, cpu<=16")(big)
    assert not parse_filter("memory>64Gi,cpu<16")(big)
    assert parse_filter("GPU=8")(big) and parse_filter("cpu!=1")(big)
    assert parse_filter("gpu=0")(_action({"resources": {"cpu": "1"}}))
    for bad, message in [
        ("gpu", "is not NAME OP QUANTITY"),
        ("gpu=>8", "is not NAME OP QUANTITY"),
        ("gpu>=8;rm", "is not NAME OP QUANTITY"),
        ("gpu>=8,", "is not NAME OP QUANTITY"),
        ("gpu>=1.5", "gpu counts whole accelerators"),
        ("memory>lots", "is not NAME OP QUANTITY"),
        ("memory>64Q", "is not a Kubernetes quantity"),
        (",".join(["cpu>1"] * (MAX_CLAUSES + 1)), f"more than {MAX_CLAUSES} clauses"),
        ("cpu>" + "9" * 300, "longer than 200 characters"),
    ]:
        with pytest.raises(InvalidInput, match=message):
            parse_filter(bad)
