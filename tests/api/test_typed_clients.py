"""The typed and the async clients (issue 17): "Every method returns `dict[str, Any]`;
return the typed models the server already has (pydantic), so editors complete and typos fail
early", and "An async client (`httpx.AsyncClient`) beside the sync one, same surface, for
executors written with asyncio". Done when "the client's types are checked by mypy in a test
file that uses them": this file is that file (see the last test)."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from mypy import api as mypy_api

from api.async_client import AsyncRetryTransport, AsyncSluiceClient
from api.calls import (
    Actions,
    Clusters,
    Environments,
    JobQueues,
    Jobs,
    Organization,
    Queues,
    QuotaShares,
    SchedulingPolicies,
    ServiceEnvironments,
)
from api.schemas.actions import ActionPublic
from api.schemas.environments import EnvironmentPublic
from api.schemas.job_queues import JobQueuePublic
from api.schemas.queues import QueuePublic
from models.errors import (
    FailedPrecondition,
    MaxQueuedTimeExceededError,
    NotFound,
    ResourceExhausted,
    SluiceError,
    Unavailable,
)
from models.quota import SchedulingPolicy, ServiceEnvironment
from models.snapshot import Cluster, Settings
from tests.support.service import Service

ROOT = Path(__file__).parents[2]


def test_send_returns_the_servers_models(svc: Service) -> None:
    """One definition of each request (api.calls); the sync client returns its model."""
    client = svc.client()
    created: QueuePublic = client.send(Queues.create("research", max_gpus=8))
    assert (created.name, created.max_gpus, created.head_blocked) == ("research", 8, False)
    action: ActionPublic = client.send(
        Actions.submit(queue="research", resources={"cpu": "1"}, id="a1")
    )
    assert (action.id, action.state.value, action.queue) == ("a1", "queued", "research")
    svc.tick()
    assert client.send(Actions.get("a1")).state.value == "scheduled"
    page, token = client.send_page(Actions.page(queue="research", limit=1))
    assert ([a.id for a in page], token) == (["a1"], None)
    (event,) = client.events(Queues.watch("research", limit=1))
    assert event.running_actions == 1
    with pytest.raises(NotFound):
        client.send(Jobs.get("nope"))
    # The seed-shaped surface sends the same requests and still returns JSON.
    from api.client import Queue

    assert Queue.details("research", client=client)["max_gpus"] == 8


def test_the_async_client_has_the_same_surface(svc: Service) -> None:
    """The same Call objects, awaited: `send`, `send_page`, `events`."""

    async def run() -> tuple[QueuePublic, list[ActionPublic], list[QueuePublic]]:
        transport = httpx.ASGITransport(app=svc.app)
        http = httpx.AsyncClient(transport=transport, base_url="http://testserver")
        async with AsyncSluiceClient("http://testserver", http=http) as client:
            queue = await client.send(Queues.create("async-q", depth=5))
            await client.send(Actions.submit(queue="async-q", resources={"cpu": "1"}, id="b1"))
            page, _ = await client.send_page(Actions.page(queue="async-q"))
            events = [event async for event in client.events(Queues.watch("async-q", limit=1))]
            with pytest.raises(NotFound):
                await client.send(Queues.details("nope"))
            return queue, page, events

    queue, page, events = asyncio.run(run())
    assert queue.depth == 5 and [a.id for a in page] == ["b1"]
    assert [event.waiting for event in events] == [1]


WEST = {"name": "west", "node_pools": [{"name": "cpu", "node": {"cpu": "8", "memory": "32Gi"},
                                         "nodes": 2}]}  # fmt: skip


def test_configuration_has_typed_calls_too(svc: Service) -> None:
    """The fleet's configuration (clusters, settings, reusable environments), scheduling
    policies, service environments, job queues and their quota shares are `Call`s too, so
    both clients send them and return the server's models, not dicts."""
    client = svc.client()
    cluster: Cluster = client.send(Clusters.put(WEST))
    assert [(p.name, p.nodes) for p in cluster.node_pools] == [("cpu", 2)]
    assert "west" in {c.name for c in client.send(Clusters.list())}
    settings: Settings = client.send(Organization.put_settings({"default_gpu_type": "H100"}))
    assert client.send(Organization.settings()) == settings
    client.send(Queues.create("warm-q"))
    warm: EnvironmentPublic = client.send(
        Environments.put({"name": "warm", "queue": "warm-q", "resources": {"cpu": "1"}})
    )
    assert (warm.queue, warm.running, client.send(Environments.get("warm")).replicas) == (
        "warm-q", False, 1)  # fmt: skip
    policy: SchedulingPolicy = client.send(SchedulingPolicies.put("fifo"))
    assert policy.quota_share_policy is not None
    capacity: ServiceEnvironment = client.send(ServiceEnvironments.put("g5", {"ml.g5.xlarge": 3}))
    assert capacity.capacity_limits == {"ml.g5.xlarge": 3}
    share = QuotaShares.spec("a", {"ml.g5.xlarge": 1}, "LEND_AND_BORROW", borrow_limit=100)
    created: JobQueuePublic = client.send(
        JobQueues.create(
            "training", scheduling_policy="fifo", service_environment="g5", quota_shares=[share]
        )
    )
    assert (created.status.value, created.shares[0].borrow_limit) == ("VALID", 100)
    two = client.send(QuotaShares.put("training", "b", {"ml.g5.xlarge": 1}, "RESERVE"))
    assert [s.name for s in two.shares] == ["a", "b"]
    lifted = client.send(QuotaShares.update("training", "a", clear_borrow_limit=True))
    assert lifted.shares[0].borrow_limit is None
    assert client.send(QuotaShares.delete("training", "b")) is None
    assert client.send(JobQueues.update("training", state="DISABLED")).state.value == "DISABLED"
    with pytest.raises(FailedPrecondition):
        client.send(SchedulingPolicies.delete("fifo"))  # training uses it
    client.send(JobQueues.delete("training"))
    client.send(SchedulingPolicies.delete("fifo"))
    with pytest.raises(NotFound):
        client.send(SchedulingPolicies.get("fifo"))
    # A name is one path segment, however it is spelt.
    with pytest.raises(NotFound):
        client.send(ServiceEnvironments.get("g5/../g5"))

    async def run() -> list[ServiceEnvironment]:
        transport = httpx.ASGITransport(app=svc.app)
        http = httpx.AsyncClient(transport=transport, base_url="http://testserver")
        async with AsyncSluiceClient("http://testserver", http=http) as aclient:
            await aclient.send(ServiceEnvironments.put("g6", {"ml.g5.xlarge": 1}))
            return await aclient.send(ServiceEnvironments.list())

    assert [e.name for e in asyncio.run(run())] == ["g5", "g6"]


def _async_client(handler: httpx.MockTransport, sleeps: list[float]) -> AsyncSluiceClient:
    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    transport = AsyncRetryTransport(handler, retries=3, sleep=sleep)
    http = httpx.AsyncClient(base_url="http://sluice", transport=transport)
    return AsyncSluiceClient("http://sluice", http=http)


def test_async_retries_and_retry_after_as_the_sync_client() -> None:
    """ "Retries with backoff for connection errors and idempotent requests, honouring
    `Retry-After` on 429" — the sync client's RetryPolicy, awaited."""
    calls: list[str] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        if request.method == "GET" and len(calls) < 3:
            raise httpx.ReadError("connection reset", request=request)
        if request.method == "POST" and calls.count("POST") == 1:
            busy = {"code": "RESOURCE_EXHAUSTED", "message": "busy"}
            return httpx.Response(429, headers={"Retry-After": "2"}, json=busy)
        if request.method == "POST":
            full = {"code": "RESOURCE_EXHAUSTED", "message": "queue q is full"}
            return httpx.Response(429, json=full)
        return httpx.Response(200, json={"name": "q"})

    sleeps: list[float] = []

    async def run() -> None:
        client = _async_client(httpx.MockTransport(flaky), sleeps)
        assert await client.json(Queues.details("q")) == {"name": "q"}
        with pytest.raises(ResourceExhausted, match="full"):
            await client.json(Actions.submit(queue="q"))

    asyncio.run(run())
    assert calls == ["GET", "GET", "GET", "POST", "POST"]
    assert sleeps == [0.25, 0.5, 2.0]


class _Events(httpx.AsyncByteStream):
    """Server-sent events, then (optionally) a dropped connection."""

    def __init__(self, events: list[tuple[int, dict[str, object]]], drop: bool) -> None:
        self.events, self.drop = events, drop

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for event_id, data in self.events:
            yield f"event: queue\nid: {event_id}\ndata: {json.dumps(data)}\n\n".encode()
        if self.drop:
            raise httpx.ReadError("connection lost")


def test_async_watch_reconnects_with_last_event_id() -> None:
    """ "`watch` reconnects with `Last-Event-ID` instead of raising", and a stream that never
    comes back is UNAVAILABLE, as for the sync client."""
    seen: list[tuple[str | None, str | None]] = []

    def server(request: httpx.Request) -> httpx.Response:
        seen.append((request.headers.get("last-event-id"), request.url.params.get("limit")))
        tick = 7 + len(seen)
        return httpx.Response(200, stream=_Events([(tick, {"tick": tick})], drop=len(seen) == 1))

    def gone(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async def run() -> list[object]:
        client = _async_client(httpx.MockTransport(server), [])
        ticks = [event["tick"] async for event in client.stream("/watch/queues/q", {"limit": 2})]
        with pytest.raises(Unavailable, match="lost the stream"):
            async for _ in _async_client(httpx.MockTransport(gone), []).stream(
                "/watch/queues/q", reconnects=1
            ):
                pass
        return ticks

    assert asyncio.run(run()) == [8, 9]
    assert seen == [(None, "2"), ("8", "1")]


class _AfterEachTick(httpx.AsyncByteStream):
    """A queue's watch stream: an event after each of `ticks` ticks of the service, then
    none (no tick comes)."""

    def __init__(self, svc: Service, ticks: int) -> None:
        self.svc, self.ticks = svc, ticks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for tick in range(self.ticks):
            self.svc.tick()
            yield f"event: queue\nid: {tick}\ndata: {{}}\n\n".encode()
        await asyncio.sleep(3600)


def test_async_wait_follows_the_queue_stream(svc: Service) -> None:
    """ "`Action.wait` follows the stream instead of polling every 0.5 s", on the async
    client too: each action is read once, then again after each tick its queue's stream
    reports; a failed one raises its code's error, and `timeout_s` bounds a wait that no
    tick ends."""
    client = svc.client()
    client.send(Queues.create("capped", max_resources={"cpu": "1"}))
    for action_id, limit in (("hog", None), ("late", "0.1s"), ("stuck", None)):
        client.send(Actions.submit(queue="capped", id=action_id, resources={"cpu": "1"},
                                   max_queued_time=limit))  # fmt: skip
    reads: list[str] = []

    def server(request: httpx.Request) -> httpx.Response:
        reads.append(request.url.path)
        if request.url.path.startswith("/watch/"):
            return httpx.Response(200, stream=_AfterEachTick(svc, ticks=1))
        answer = svc.http.request(request.method, request.url.path)
        return httpx.Response(answer.status_code, content=answer.content, headers=answer.headers)

    async def run() -> ActionPublic:
        aclient = _async_client(httpx.MockTransport(server), [])
        hog = await aclient.wait_action("hog")
        await asyncio.sleep(0.2)  # past late's max_queued_time
        with pytest.raises(MaxQueuedTimeExceededError):
            await aclient.wait_action("late")
        with pytest.raises(Unavailable, match=r"still queued after 0\.2 s"):
            await aclient.wait_action("stuck", timeout_s=0.2)
        return hog

    assert asyncio.run(run()).state.value == "scheduled"
    follow = ["/actions/{0}", "/watch/queues/capped", "/actions/{0}"]  # then, after one tick
    # A tick the submissions woke may already have failed `late` at its deadline; then its
    # first read settles the wait and nothing is followed.
    settled = ["/actions/late"]
    assert reads in (
        [read.format(a) for a in ("hog", "late", "stuck") for read in follow],
        [read.format("hog") for read in follow] + settled + [r.format("stuck") for r in follow],
    )


def test_async_job_wait_polls_until_the_job_settles(svc: Service) -> None:
    """The sync `Job.wait`, awaited: read every `poll_s` until the job holds its instances;
    a failed one raises its code's error; `timeout_s` bounds the whole wait."""
    client = svc.client()
    client.send(SchedulingPolicies.put("fifo"))
    client.send(ServiceEnvironments.put("g5", {"ml.g5.xlarge": 3}))
    share = QuotaShares.spec("c", {"ml.g5.xlarge": 1}, "RESERVE")
    client.send(JobQueues.create("training", scheduling_policy="fifo",
                                 service_environment="g5", quota_shares=[share]))  # fmt: skip
    for job_id in ("j1", "j2"):
        client.send(Jobs.submit(job_queue="training", share="c", instance_type="ml.g5.xlarge",
                                id=job_id))  # fmt: skip
    reads: list[str] = []

    def server(request: httpx.Request) -> httpx.Response:
        reads.append(request.url.path)
        if len(reads) == 2:
            svc.tick()  # between the first read and the second
        answer = svc.http.request(request.method, request.url.path)
        return httpx.Response(answer.status_code, content=answer.content, headers=answer.headers)

    async def run() -> str:
        aclient = _async_client(httpx.MockTransport(server), [])
        job = await aclient.wait_job("j1", poll_s=0.01)
        with pytest.raises(Unavailable, match=r"job j2 is still QUEUED after 0\.1 s"):
            await aclient.wait_job("j2", poll_s=0.02, timeout_s=0.1)  # j1 holds the share
        client.send(Jobs.report("j1", "failed", code="INTERNAL", message="lost its host"))
        with pytest.raises(SluiceError, match="lost its host"):
            await aclient.wait_job("j1", until=("SUCCEEDED",))
        return job.state.value

    assert asyncio.run(run()) == "SCHEDULED"
    assert reads[:2] == ["/jobs/j1", "/jobs/j1"]


@pytest.mark.slow
def test_mypy_checks_the_client_types(tmp_path: Path) -> None:
    """ "the client's types are checked by mypy in a test file that uses them": this file
    type-checks, and a typo in a field of an answer, or in a keyword, is an error before
    anything runs."""
    typo = tmp_path / "typo.py"
    typo.write_text(
        textwrap.dedent(
            """
            from api.calls import Queues
            from api.client import Cron, SluiceClient, Trigger

            def blocked(client: SluiceClient) -> bool:
                return client.send(Queues.details("research")).head_blokced

            nightly = Trigger("nightly", Cron("0 2 * * *"), queue="batch", resorces={"cpu": "4"})
            """
        )
    )
    # The project's settings (pyproject), so the cache of the checks' own mypy run serves.
    options = ["--config-file", str(ROOT / "pyproject.toml"), "--follow-imports=silent",
               "--python-executable", sys.executable]  # fmt: skip
    out, _, status = mypy_api.run([*options, str(Path(__file__))])
    assert status == 0, out
    out, _, status = mypy_api.run([*options, str(typo)])
    assert status == 1 and '"QueuePublic" has no attribute "head_blokced"' in out, out
    # A trigger's action keywords are a submission's without its place (ActionRequest).
    assert 'Unexpected keyword argument "resorces" for "Trigger"' in out, out
