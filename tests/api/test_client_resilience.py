"""The Python client against a scripted server (httpx.MockTransport): retries, Retry-After,
watch streams that reconnect, waiting that follows the stream, encoded paths (issue 17)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator

import httpx
import pytest

from api.calls import (
    ActionFilter,
    Actions,
    JobQueueChanges,
    JobQueues,
    JobQueueSettings,
    JobSubmission,
    Queues,
    QueueSettings,
    QuotaShares,
    ShareChanges,
    ShareOptions,
    Submission,
)
from api.client import Action, Job, JobQueue, Queue, QuotaShare, RetryTransport, SluiceClient
from models.errors import ResourceExhausted, Unavailable

Handler = Callable[[httpx.Request], httpx.Response]


def _client(handler: Handler, sleeps: list[float]) -> SluiceClient:
    transport = RetryTransport(httpx.MockTransport(handler), retries=3, sleep=sleeps.append)
    return SluiceClient(
        "http://sluice", http=httpx.Client(base_url="http://sluice", transport=transport)
    )


def test_idempotent_requests_are_retried_with_backoff() -> None:
    """Issue 17: "Retries with backoff for connection errors and idempotent requests"."""
    calls: list[str] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        if len(calls) < 3:
            raise httpx.ReadError("connection reset", request=request)
        return httpx.Response(200, json={"name": "q"})

    sleeps: list[float] = []
    assert Queue.details("q", client=_client(flaky, sleeps)) == {"name": "q"}
    assert calls == ["GET"] * 3 and sleeps == [0.25, 0.5]

    calls.clear()
    with pytest.raises(Unavailable):  # a POST that may have arrived is not sent twice
        Action.submit(queue="q", client=_client(flaky, sleeps))
    assert calls == ["POST"]


def test_retry_after_is_honoured_and_a_full_queue_is_an_answer() -> None:
    """Issue 17: "honouring `Retry-After` on 429"."""
    replies = iter(
        [
            httpx.Response(
                429,
                headers={"Retry-After": "2"},
                json={"code": "RESOURCE_EXHAUSTED", "message": "busy"},
            ),
            httpx.Response(201, json={"id": "a"}),
            httpx.Response(429, json={"code": "RESOURCE_EXHAUSTED", "message": "queue q is full"}),
        ]
    )
    sleeps: list[float] = []
    client = _client(lambda request: next(replies), sleeps)
    assert Action.submit(queue="q", client=client) == {"id": "a"}
    assert sleeps == [2.0]
    with pytest.raises(ResourceExhausted, match="full"):
        Action.submit(queue="q", client=client)
    assert sleeps == [2.0]


class _Events(httpx.SyncByteStream):
    """Server-sent events, then (optionally) a dropped connection."""

    def __init__(self, events: list[tuple[int, dict[str, object]]], drop: bool) -> None:
        self.events, self.drop = events, drop

    def __iter__(self) -> Iterator[bytes]:
        for event_id, data in self.events:
            yield f"event: queue\nid: {event_id}\ndata: {json.dumps(data)}\n\n".encode()
        if self.drop:
            raise httpx.ReadError("connection lost")


def test_watch_reconnects_with_last_event_id() -> None:
    """Issue 17: "`watch` reconnects with `Last-Event-ID` instead of raising"."""
    seen: list[tuple[str | None, str | None]] = []

    def server(request: httpx.Request) -> httpx.Response:
        seen.append((request.headers.get("last-event-id"), request.url.params.get("limit")))
        tick = 7 + len(seen)
        return httpx.Response(200, stream=_Events([(tick, {"tick": tick})], drop=len(seen) == 1))

    ticks = [event["tick"] for event in Queue.watch("q", limit=2, client=_client(server, []))]
    assert ticks == [8, 9]
    assert seen == [(None, "2"), ("8", "1")]


def test_a_stream_that_never_comes_back_raises_unavailable() -> None:
    def gone(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    client = _client(gone, [])
    with pytest.raises(Unavailable, match="lost the stream"):
        list(client.stream("/watch/queues/q", reconnects=1))


def test_action_wait_follows_the_queue_stream() -> None:
    """Issue 17: "`Action.wait` follows the stream instead of polling every 0.5 s"."""
    states = iter(["queued", "queued", "scheduled"])
    reads: list[str] = []

    def server(request: httpx.Request) -> httpx.Response:
        reads.append(request.url.path)
        if request.url.path == "/watch/queues/q":
            return httpx.Response(200, stream=_Events([(1, {}), (2, {})], drop=False))
        return httpx.Response(200, json={"id": "a", "queue": "q", "state": next(states)})

    found = Action.wait("a", poll_s=3600, client=_client(server, []))
    assert found["state"] == "scheduled"
    assert reads == ["/actions/a", "/watch/queues/q", "/actions/a", "/actions/a"]


def test_path_segments_are_url_encoded() -> None:
    """Issue 17: "path segments URL-encoded"."""
    paths: list[bytes] = []

    def server(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.raw_path)
        return httpx.Response(200, json={})

    Queue.details("a/b?c#d", client=_client(server, []))
    assert paths == [b"/queues/a%2Fb%3Fc%23d"]


def test_submit_has_an_explicit_signature() -> None:
    """Issue 17: "`Action.submit(**spec)` hides its parameters: give it an explicit signature".
    The keywords are written once (a TypedDict that mypy and editors read); `help()` and
    `inspect` list each of them too, on every surface that takes them."""
    parameters = inspect.signature(Action.submit).parameters
    assert all(p.kind is not inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    assert set(inspect.signature(Action.spec).parameters) | {"client"} == set(parameters)
    assert set(Submission.__annotations__) | {"client"} == set(parameters)
    surfaces = {
        Queue.create: QueueSettings, Queues.update: QueueSettings, Action.page: ActionFilter,
        Actions.page: ActionFilter, Job.submit: JobSubmission, JobQueue.create: JobQueueSettings,
        JobQueues.update: JobQueueChanges, QuotaShare.put: ShareOptions,
        QuotaShares.update: ShareChanges,
    }  # fmt: skip
    for function, fields in surfaces.items():
        parameters = inspect.signature(function).parameters
        assert set(fields.__annotations__) <= set(parameters), function
        assert all(p.kind is not inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    required = inspect.signature(Job.submit).parameters
    assert required["share"].default is inspect.Parameter.empty
    assert required["count"].default is None
