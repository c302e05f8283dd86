"""Python client for a running Sluice server, shaped like the seed's API.

    from api.client import Queue, Action

    Queue.create("research", run_concurrency=100, action_concurrency=1000,
                 max_resources={"cpu": "512", "memory": "4Ti"}, max_gpus=8,
                 max_accelerators={"H100": 48}, scheduling="greedy_capacity")
    Queue.update("research", clear_max_gpus=True)
    metrics = Queue.details("research")
    for metrics in Queue.watch("research"): ...

The server address and token come from SLUICE_URL and SLUICE_TOKEN, from
`configure(url=..., token=...)`, or from a `client=SluiceClient(...)` argument.
Every error the server reports is raised as its own class from
models.errors (`ResourceExhausted`, `MaxQueuedTimeExceededError`, ...).
"""

from __future__ import annotations

import builtins
import email.utils
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Generic, TypeVar, Unpack, overload

import httpx

from api.calls import (
    ActionFilter,
    ActionRequest,
    Actions,
    Call,
    Clusters,
    Environments,
    JobQueueChanges,
    JobQueues,
    JobQueueSettings,
    Jobs,
    JobSubmission,
    Organization,
    Queues,
    QueueSettings,
    QuotaShares,
    SchedulingPolicies,
    ServiceEnvironments,
    ShareChanges,
    ShareOptions,
    Stream,
    Submission,
    Tasks,
    Triggers,
    keywords,
)
from api.calls import drop_unset as _drop_unset
from api.calls import without as _without
from models.errors import (
    AlreadyExists,
    ErrorCode,
    FailedPrecondition,
    SluiceError,
    Unavailable,
    error_from_code,
)

DEFAULT_URL = "http://127.0.0.1:8000"
NEXT_PAGE_HEADER = "Next-Page-Token"  # api.deps sends it on every page but the last

JSON = dict[str, Any]
T = TypeVar("T")


IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


def retry_after_s(response: httpx.Response) -> float | None:
    """The wait a `Retry-After` header asks for (seconds or an HTTP date), None without one."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, (when - datetime.now(UTC)).total_seconds())


@dataclass(frozen=True)
class RetryPolicy:
    """When a request is tried again, for the sync and the async transports alike.

    An idempotent request that could not get an answer (a dropped connection, a reset) is
    retried with exponential backoff, and any request the server answers with 429 or 503
    and a `Retry-After` header, after the wait it asks for. Connect errors are retried by
    the wrapped httpx transport (`retries=...`) for every method (nothing was sent yet). A
    429 without `Retry-After` (a full queue) is an answer, not a retry: it is raised as
    RESOURCE_EXHAUSTED at once.
    """

    retries: int = 3
    backoff_s: float = 0.25
    max_wait_s: float = 30.0

    def after_error(self, attempt: int, request: httpx.Request) -> float | None:
        """The wait before trying again after a transport error, None to raise it."""
        if attempt == self.retries or request.method not in IDEMPOTENT:
            return None
        return min(self.max_wait_s, self.backoff_s * 2**attempt)

    def after_answer(self, attempt: int, response: httpx.Response) -> float | None:
        """The wait before trying again after an answer, None to return it."""
        wait = retry_after_s(response) if response.status_code in (429, 503) else None
        if wait is None or attempt == self.retries or wait > self.max_wait_s:
            return None
        return wait


class RetryTransport(httpx.BaseTransport):
    """An httpx transport that retries as its RetryPolicy says."""

    def __init__(
        self,
        inner: httpx.BaseTransport,
        retries: int = 3,
        backoff_s: float = 0.25,
        max_wait_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.inner = inner
        self.policy = RetryPolicy(retries, backoff_s, max_wait_s)
        self.sleep = sleep

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        for attempt in range(self.policy.retries + 1):
            try:
                response = self.inner.handle_request(request)
            except httpx.TransportError:
                wait = self.policy.after_error(attempt, request)
                if wait is None:
                    raise
                self.sleep(wait)
                continue
            wait = self.policy.after_answer(attempt, response)
            if wait is None:
                return response
            response.close()
            self.sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def close(self) -> None:
        self.inner.close()


class StreamCursor:
    """Where a server-sent event stream is, across reconnects, for the sync and the async
    clients alike: the last event's id (sent back as `Last-Event-ID`), how many events a
    `limit` still allows, and how many connections in a row brought nothing."""

    def __init__(self, url: str, params: dict[str, Any] | None, reconnects: int) -> None:
        self.url = url
        self.params = dict(params or {})
        self.limit: int | None = self.params.get("limit")
        self.reconnects = reconnects
        self.last_id: str | None = None
        self.sent = 0
        self.fruitless = 0
        self.got_one = False

    def request(self) -> tuple[dict[str, Any], dict[str, str]]:
        """The parameters and headers of the next connection."""
        self.got_one = False
        if self.limit is not None:
            self.params["limit"] = self.limit - self.sent
        return self.params, {"Last-Event-ID": self.last_id} if self.last_id is not None else {}

    def seen(self, event_id: str | None) -> bool:
        """Count one event; True once the limit is reached."""
        self.got_one = True
        self.last_id = event_id if event_id is not None else self.last_id
        self.sent += 1
        return self.limit is not None and self.sent >= self.limit

    def dropped(self, problem: str) -> float:
        """The connection ended: the backoff before the next, or UNAVAILABLE after
        `reconnects` connections in a row without an event."""
        self.fruitless = 0 if self.got_one else self.fruitless + 1
        if self.fruitless > self.reconnects:
            raise Unavailable(f"lost the stream from {self.url}: {problem}")
        return min(5.0, 0.25 * 2**self.fruitless)


def client_headers(token: str | None) -> dict[str, str]:
    """The token from the caller or SLUICE_TOKEN, as a bearer header."""
    token = token or os.environ.get("SLUICE_TOKEN")
    return {"Authorization": f"Bearer {token}"} if token else {}


def server_url(url: str | None) -> str:
    return (url or os.environ.get("SLUICE_URL") or DEFAULT_URL).rstrip("/")


H = TypeVar("H", httpx.Client, httpx.AsyncClient)


class Connection(Generic[H]):
    """What the sync and the async clients share: the server's address, the token, and an
    httpx client that retries as RetryPolicy says."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        timeout_s: float = 30.0,
        http: H | None = None,
        retries: int = 3,
    ) -> None:
        """`http` replaces the connection (a FastAPI TestClient or an ASGI transport, in
        tests); `retries` is how often a request that got no answer, or a 429/503 with
        `Retry-After`, is tried again."""
        self.url = server_url(url)
        headers = client_headers(token)
        if http is None:
            http = self._connect(headers, timeout_s, retries)
        else:
            http.headers.update(headers)
        self._http: H = http

    def _connect(self, headers: dict[str, str], timeout_s: float, retries: int) -> H:
        raise NotImplementedError

    def _unreachable(self, error: httpx.HTTPError) -> Unavailable:
        return Unavailable(f"cannot reach the Sluice server at {self.url}: {error}")


class SluiceClient(Connection[httpx.Client]):
    """One connection to a server: address, token, retries, and the error mapping.

    `send(call)` sends one request of api.calls and returns the server's model
    (`client.send(Queues.details("research")).head_blocked`); `request` returns JSON.
    """

    def _connect(self, headers: dict[str, str], timeout_s: float, retries: int) -> httpx.Client:
        transport = RetryTransport(httpx.HTTPTransport(retries=retries), retries)
        return httpx.Client(
            base_url=self.url, headers=headers, timeout=timeout_s, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def send(self, call: Call[T]) -> T:
        """Send one request; return its answer as the server's model, or raise its error."""
        return call.read(self.json(call))

    def json(self, call: Call[Any]) -> Any:
        """Send one request; return the answer's JSON (None for an empty one)."""
        return self.request(call.method, call.path, body=call.body, params=call.params)

    def send_page(self, call: Call[builtins.list[T]]) -> tuple[builtins.list[T], str | None]:
        """One page of a listing, as models, and the next page's token (None on the last)."""
        items, token = self.page(call.path, call.params or {})
        return call.read(items), token

    def events(self, stream: Stream[T], *, reconnects: int = 5) -> Iterator[T]:
        """A stream's events as models (see `stream`)."""
        for data in self.stream(stream.path, stream.params, reconnects=reconnects):
            yield stream.read(data)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        """Send one request; return the decoded JSON body, or raise the server's error."""
        response = self._send(method, path, body, params)
        return response.json() if response.content else None

    def page(self, path: str, params: dict[str, Any]) -> tuple[list[JSON], str | None]:
        """One page of a listing and the token of the next one (None on the last page)."""
        response = self._send("GET", path, None, params)
        return response.json(), response.headers.get(NEXT_PAGE_HEADER)

    def _send(
        self, method: str, path: str, body: Any, params: dict[str, Any] | None
    ) -> httpx.Response:
        try:
            response = self._http.request(method, path, json=body, params=params)
        except httpx.HTTPError as error:
            raise self._unreachable(error) from None
        if response.is_error:
            raise error_of(response)
        return response

    def stream(
        self, path: str, params: dict[str, Any] | None = None, *, reconnects: int = 5
    ) -> Iterator[Any]:
        """The data of each server-sent event, decoded; an `error` event is raised.

        A stream that drops (or that the server closes, as it does when it restarts) is
        opened again with `Last-Event-ID`, after a backoff; a `limit` counts the events of
        every connection. `reconnects` connections in a row without an event raise UNAVAILABLE.
        """
        cursor = StreamCursor(self.url, params, reconnects)
        while True:
            query, headers = cursor.request()
            problem = "the server closed it"
            try:
                with self._http.stream(
                    "GET", path, params=query, headers=headers, timeout=STREAM_TIMEOUT
                ) as response:
                    if response.is_error:
                        response.read()
                        raise error_of(response)
                    for event_id, decoded in server_events(response.iter_lines()):
                        done = cursor.seen(event_id)
                        yield decoded
                        if done:
                            return
            except httpx.HTTPError as error:
                problem = str(error) or type(error).__name__
            time.sleep(cursor.dropped(problem))


STREAM_TIMEOUT = httpx.Timeout(30.0, read=None)  # idle streams get keep-alive comments


class EventReader:
    """Server-sent events from lines: (id, decoded data) per event; an `error` event raises.
    Fed a line at a time, so the sync and the async clients read streams alike."""

    def __init__(self) -> None:
        self.event = "message"
        self.event_id: str | None = None
        self.data: list[str] = []

    def _next(self) -> None:
        self.event, self.event_id, self.data = "message", None, []

    def feed(self, line: str) -> tuple[str | None, Any] | None:
        """The event a blank line completes, else None."""
        if line.startswith("event:"):
            self.event = line[6:].strip()
        elif line.startswith("id:"):
            self.event_id = line[3:].strip()
        elif line.startswith("data:"):
            self.data.append(line[5:].strip())
        elif not line and self.data:
            decoded = json.loads("\n".join(self.data))
            if self.event == "error":
                raise error_from_code(**decoded)
            done = (self.event_id, decoded)
            self._next()
            return done
        return None


def server_events(lines: Iterator[str]) -> Iterator[tuple[str | None, Any]]:
    """(id, decoded data) of each server-sent event; an `error` event is raised."""
    reader = EventReader()
    for line in lines:
        event = reader.feed(line)
        if event is not None:
            yield event


def error_of(response: httpx.Response) -> SluiceError:
    """The server's error answer as its exception (models.errors)."""
    try:
        body = response.json()
        return error_from_code(body["code"], body["message"], body.get("field"))
    except (ValueError, KeyError, TypeError):
        code = ErrorCode.UNAVAILABLE if response.status_code >= 502 else ErrorCode.INTERNAL
        return error_from_code(code, f"HTTP {response.status_code}: {response.text[:200]}")


_default: SluiceClient | None = None


def configure(url: str | None = None, token: str | None = None) -> SluiceClient:
    """Set the client the class methods use when given none."""
    global _default
    if _default is not None:
        _default.close()
    _default = SluiceClient(url, token)
    return _default


def _client(client: SluiceClient | None) -> SluiceClient:
    return client or _default or configure()


def _streamed(stream: Stream[Any], client: SluiceClient | None) -> Iterator[Any]:
    """A stream's events as JSON, as the seed-shaped classes return them."""
    return _client(client).stream(stream.path, stream.params)


class Queue:
    """Queues, as in the seed: create, update, details, watch, watch_pool; plus list,
    drain and delete."""

    @staticmethod
    @keywords(QueueSettings)
    def create(
        name: str, *, client: SluiceClient | None = None, **settings: Unpack[QueueSettings]
    ) -> JSON:
        """Create a queue; returns its details."""
        return _client(client).json(Queues.create(name, **settings))

    @staticmethod
    @keywords(QueueSettings)
    def update(
        name: str,
        *,
        clear_max_resources: bool = False,
        clear_max_gpus: bool = False,
        clear_max_accelerators: bool = False,
        client: SluiceClient | None = None,
        **settings: Unpack[QueueSettings],
    ) -> JSON:
        """Change a live queue. A map replaces the queue's map: `max_resources={}` removes
        the resource caps, as does `clear_max_resources=True`."""
        call = Queues.update(
            name,
            clear_max_resources=clear_max_resources,
            clear_max_gpus=clear_max_gpus,
            clear_max_accelerators=clear_max_accelerators,
            **settings,
        )
        return _client(client).json(call)

    @staticmethod
    def details(name: str, *, client: SluiceClient | None = None) -> JSON:
        """Settings and usage: in_flight_resources, max_resources, accelerator_charges,
        max_gpus, max_accelerators, scheduling, head_blocked, head_blocked_since, ..."""
        return _client(client).json(Queues.details(name))

    @staticmethod
    def list(pools: list[str] | None = None, *, client: SluiceClient | None = None) -> list[JSON]:
        return _client(client).json(Queues.list(pools))

    @staticmethod
    def watch(
        name: str, *, limit: int | None = None, client: SluiceClient | None = None
    ) -> Iterator[JSON]:
        """The queue's details now and after every tick."""
        return _streamed(Queues.watch(name, limit=limit), client)

    @staticmethod
    def watch_pool(
        pools: builtins.list[str] | None = None,  # `list` in this class is Queue.list
        *,
        limit: int | None = None,
        client: SluiceClient | None = None,
    ) -> Iterator[builtins.list[JSON]]:
        """Every live queue in the pools (all pools when omitted), now and after every tick."""
        return _streamed(Queues.watch_pool(pools, limit=limit), client)

    @staticmethod
    def drain(name: str, *, undo: bool = False, client: SluiceClient | None = None) -> JSON:
        """Accept nothing new (or, with undo, accept again); what is there still runs."""
        return _client(client).json(Queues.drain(name, undo=undo))

    @staticmethod
    def delete(name: str, *, client: SluiceClient | None = None) -> None:
        _client(client).json(Queues.delete(name))

    @staticmethod
    def move(
        name: str, *, to: str, where: str | None = None, client: SluiceClient | None = None
    ) -> builtins.list[str]:
        """Move the waiting actions of `name` (those `where` keeps, e.g. "gpu>=8") to queue
        `to`, all or none, in arrival order; returns the ids moved."""
        return _client(client).json(Queues.move(name, to=to, where=where))["ids"]


def _every(poll_s: float) -> Iterator[None]:
    while True:
        time.sleep(poll_s)
        yield


@dataclass(frozen=True)
class Settling:
    """When a wait for an action or a job ends, for the sync and the async clients alike.

    `failed_and_done` starts with the failed state (raised as its code's error, so a
    caller can resubmit elsewhere), then the other states nothing comes after.
    """

    what: str  # "action a1", in the errors
    until: tuple[str, ...]
    failed_and_done: tuple[str, ...]

    def settled(self, state: str, code: str | None, message: str | None) -> bool:
        """True once `state` is one of `until`; raises once nothing can come after it."""
        if state in self.until:
            return True
        if state == self.failed_and_done[0]:
            raise error_from_code(code or ErrorCode.INTERNAL, message or "failed")
        if state in self.failed_and_done:
            raise FailedPrecondition(f"{self.what} is {state}")
        return False

    def timed_out(self, state: str, timeout_s: float) -> Unavailable:
        return Unavailable(f"{self.what} is still {state} after {timeout_s:g} s")


ACTION_SETTLED = ("scheduled", "running", "succeeded")  # what a wait for an action waits for
ACTION_FAILED_AND_DONE = ("failed", "succeeded", "cancelled")
JOB_SETTLED = ("SCHEDULED", "STARTING", "RUNNING", "SUCCEEDED")
JOB_FAILED_AND_DONE = ("FAILED", "SUCCEEDED", "CANCELLED")


def _wait(
    settling: Settling,
    fetch: Callable[[], JSON],
    timeout_s: float | None,
    changes: Callable[[JSON], Iterator[object]],
) -> JSON:
    """Fetch until it settles, again after each item of `changes(first found)`."""
    started = time.monotonic()
    found = fetch()
    following: Iterator[object] | None = None  # opened only if the first read does not settle
    while not settling.settled(found["state"], found.get("code"), found.get("message")):
        if timeout_s is not None and time.monotonic() - started > timeout_s:
            raise settling.timed_out(found["state"], timeout_s)
        if following is None:
            following = changes(found)
        next(following)
        found = fetch()
    return found


class _Tracked:
    """What Action and Job share: executors report the outcome of each one, and a caller
    can cancel it or wait for it to settle."""

    _calls: ClassVar[type[Actions] | type[Jobs]]  # its requests
    _noun: ClassVar[str]  # "action", in the errors of `wait`
    _until: ClassVar[tuple[str, ...]]  # what `wait` waits for by default
    _failed_and_done: ClassVar[tuple[str, ...]]  # the failed state, then the other last ones

    @classmethod
    def get(cls, item_id: str, *, client: SluiceClient | None = None) -> JSON:
        """Its settings and state; a job also says its last_preemption and why it waits."""
        return _client(client).json(cls._calls.get(item_id))

    @classmethod
    def cancel(cls, item_id: str, *, client: SluiceClient | None = None) -> JSON:
        return _client(client).json(cls._calls.cancel(item_id))

    @classmethod
    def report(
        cls,
        item_id: str,
        outcome: str,
        *,
        code: str | None = None,
        message: str | None = None,
        client: SluiceClient | None = None,
    ) -> JSON:
        """For executors: `started`, `succeeded` or `failed` (a job also `starting`, while its
        containers start); refused for a preempted job."""
        call = cls._calls.report(item_id, outcome, code=code, message=message)
        return _client(client).json(call)

    @classmethod
    def wait(
        cls,
        item_id: str,
        *,
        until: tuple[str, ...] | None = None,
        timeout_s: float | None = None,
        poll_s: float = 0.5,
        client: SluiceClient | None = None,
    ) -> JSON:
        """Wait until it reaches one of `until` (by default scheduled, running or succeeded).

        A failed one raises its code's exception (MaxQueuedTimeExceededError,
        Infeasible, DeadlineExceeded, ...), so a caller can resubmit elsewhere. An action
        is read again after each tick (its queue's watch stream); a job every `poll_s`.
        `timeout_s` is checked at each of those.
        """
        settling = Settling(
            f"{cls._noun} {item_id}", cls._until if until is None else until, cls._failed_and_done
        )
        return _wait(
            settling,
            lambda: cls.get(item_id, client=client),
            timeout_s,
            lambda found: cls._changes(found, poll_s, _client(client)),
        )

    @classmethod
    def _changes(cls, found: JSON, poll_s: float, client: SluiceClient) -> Iterator[object]:
        """When to read it again: every `poll_s`."""
        return _every(poll_s)


class Action(_Tracked):
    """Submitting work and following it."""

    _calls = Actions
    _noun = "action"
    _until = ACTION_SETTLED
    _failed_and_done = ACTION_FAILED_AND_DONE

    @classmethod
    def _changes(cls, found: JSON, poll_s: float, client: SluiceClient) -> Iterator[object]:
        """After each tick: its queue's watch stream (its first event, at once, covers a tick
        between the first read and the stream's start)."""
        return Queue.watch(found["queue"], client=client)

    spec = staticmethod(Actions.spec)

    @staticmethod
    @keywords(Submission)
    def submit(*, client: SluiceClient | None = None, **submission: Unpack[Submission]) -> JSON:
        """Queue one action (the keywords of `Action.spec`); raises ResourceExhausted when the
        queue is full, QueueDraining when it is draining."""
        return _client(client).json(Actions.submit(**submission))

    @staticmethod
    def move(ids: list[str], *, to: str, client: SluiceClient | None = None) -> list[str]:
        """Move waiting actions to queue `to`, all or none, keeping their arrival order."""
        return _client(client).json(Actions.move(ids, to=to))["ids"]

    @staticmethod
    def submit_batch(specs: list[JSON], *, client: SluiceClient | None = None) -> list[str]:
        """Queue many actions (bodies from `Action.spec`), all or none; returns their ids."""
        return _client(client).json(Actions.submit_batch(specs))["ids"]

    @staticmethod
    @keywords(ActionFilter)
    def list(
        *, limit: int = 100, client: SluiceClient | None = None, **where: Unpack[ActionFilter]
    ) -> list[JSON]:
        """The first page (or the page `page_token` names); `Action.page` also gives the
        token of the next."""
        return Action.page(limit=limit, client=client, **where)[0]

    @staticmethod
    @keywords(ActionFilter)
    def page(
        *, limit: int = 100, client: SluiceClient | None = None, **where: Unpack[ActionFilter]
    ) -> tuple[builtins.list[JSON], str | None]:
        """Actions in arrival order (`order="desc"`: newest first) and the next page's token,
        None on the last page."""
        call = Actions.page(limit=limit, **where)
        return _client(client).page(call.path, call.params or {})


class Cron:
    """A cron schedule, as in the seed: `Cron("0 2 * * *")`, optionally in a time zone."""

    def __init__(self, expression: str, timezone: str | None = None) -> None:
        self.expression = expression
        self.timezone = timezone

    def body(self) -> JSON:
        return _drop_unset(cron=self.expression, timezone=self.timezone)


class FixedRate:
    """A fixed rate: `FixedRate("10m")` (or seconds), counted from the trigger's creation."""

    def __init__(self, every: str | float) -> None:
        self.every = every

    def body(self) -> JSON:
        return {"every": self.every}


class Trigger:
    """Scheduled runs sent to a queue, shaped like the seed:

        Trigger("nightly", Cron("0 2 * * *"), queue="batch", resources={"cpu": "4"}).create()

    Each firing submits the trigger's actions as one new run: `actions` (bodies shaped like
    `Action.spec`, without id, run or queue), or one action from `Action.spec`'s keywords.
    """

    @keywords(ActionRequest)
    def __init__(
        self,
        name: str,
        schedule: Cron | FixedRate,
        *,
        queue: str | None = None,
        actions: builtins.list[JSON] | None = None,
        catch_up: str | None = None,
        paused: bool | None = None,
        **spec: Unpack[ActionRequest],
    ) -> None:
        self.name = name
        self.schedule = schedule
        self.queue = queue
        self.actions = actions if actions is not None else [Action.spec(**spec)]
        self.catch_up = catch_up
        self.paused = paused

    def create(self, *, client: SluiceClient | None = None) -> JSON:
        """Store the trigger; returns it with its next scheduled time."""
        body = _drop_unset(
            name=self.name,
            queue=self.queue,
            actions=self.actions,
            catch_up=self.catch_up,
            paused=self.paused,
        )
        return _client(client).json(Triggers.create(body | self.schedule.body()))

    @staticmethod
    def get(name: str, *, client: SluiceClient | None = None) -> JSON:
        """Its schedule, state, next time and history of firings (newest first)."""
        return _client(client).json(Triggers.get(name))

    @staticmethod
    def list(*, client: SluiceClient | None = None) -> builtins.list[JSON]:
        return _client(client).json(Triggers.list())

    @staticmethod
    def update(
        name: str,
        *,
        schedule: Cron | FixedRate | None = None,
        timezone: str | None = None,
        queue: str | None = None,
        actions: builtins.list[JSON] | None = None,
        catch_up: str | None = None,
        client: SluiceClient | None = None,
    ) -> JSON:
        """Change some fields; a new schedule plans the next time again from now. A
        `timezone` alone moves the cron expression to that zone."""
        changes = _drop_unset(timezone=timezone, queue=queue, actions=actions, catch_up=catch_up)
        if schedule is not None:
            changes |= schedule.body()
        return _client(client).json(Triggers.update(name, changes))

    @staticmethod
    def pause(name: str, *, client: SluiceClient | None = None) -> JSON:
        return _client(client).json(Triggers.pause(name))

    @staticmethod
    def resume(name: str, *, client: SluiceClient | None = None) -> JSON:
        return _client(client).json(Triggers.pause(name, undo=True))

    @staticmethod
    def delete(name: str, *, client: SluiceClient | None = None) -> None:
        """The trigger and its history go; the runs it submitted stay."""
        _client(client).json(Triggers.delete(name))


class Task:
    """A stored task template, shaped like the seed's tasks:

        env = TaskEnvironment("my_env", queue="default-pool")
        @env.task(queue="gpu-pool", resources={"cpu": "8"})
        def train_model() -> None: ...

        train_model.override(queue="spot", resources={"cpu": "4"}).submit()

    A submission without a queue goes to its run's queue, else the task's, else its
    environment's, else the default queue; the action's `queue_source` says which.
    """

    def __init__(
        self,
        name: str,
        *,
        queue: str | None = None,
        resources: Mapping[str, str | int] | None = None,
        client: SluiceClient | None = None,
    ) -> None:
        self.name = name
        self.queue = queue  # this invocation's (from `override`), not the template's
        self.resources = resources
        self.client = client

    @staticmethod
    def create(
        name: str,
        *,
        queue: str | None = None,
        environment_queue: str | None = None,
        resources: Mapping[str, str | int] | None = None,
        gpu: str | int | None = None,
        environment: str | None = None,
        max_queued_time: str | float | None = None,
        client: SluiceClient | None = None,
    ) -> Task:
        """Store the template (one container from `resources`/`gpu`, or a reusable
        `environment`); returns the task to submit."""
        containers = None
        if environment is None:
            containers = [_drop_unset(resources=dict(resources or {}), gpu=gpu)]
        body = _drop_unset(
            name=name,
            queue=queue,
            environment_queue=environment_queue,
            containers=containers,
            environment=environment,
            max_queued_time=max_queued_time,
        )
        _client(client).json(Tasks.create(body))
        return Task(name, client=client)

    @staticmethod
    def get(name: str, *, client: SluiceClient | None = None) -> JSON:
        return _client(client).json(Tasks.get(name))

    @staticmethod
    def list(*, client: SluiceClient | None = None) -> builtins.list[JSON]:
        return _client(client).json(Tasks.list())

    @staticmethod
    def delete(name: str, *, client: SluiceClient | None = None) -> None:
        _client(client).json(Tasks.delete(name))

    def override(
        self, *, queue: str | None = None, resources: Mapping[str, str | int] | None = None
    ) -> Task:
        """This task for one invocation on `queue` and/or with one container of `resources`
        (the seed's `task.override(queue=..., resources=...)`)."""
        return Task(
            self.name,
            queue=queue if queue is not None else self.queue,
            resources=resources if resources is not None else self.resources,
            client=self.client,
        )

    def spec(self, *, run: str | None = None, run_queue: str | None = None) -> JSON:
        return Action.spec(
            task=self.name, queue=self.queue, resources=self.resources, run=run, run_queue=run_queue
        )

    def submit(self, *, run: str | None = None, id: str | None = None) -> JSON:
        """Submit one invocation (into run `run`, which keeps the queue it was created with);
        returns the action."""
        body = self.spec(run=run) | _drop_unset(id=id)
        return _client(self.client).json(Actions.submit_spec(body))


class TaskEnvironment:
    """The seed's `TaskEnvironment(name, queue=...)`: tasks declared with `env.task` route to
    its queue unless they set their own."""

    def __init__(
        self, name: str, *, queue: str | None = None, client: SluiceClient | None = None
    ) -> None:
        self.name = name
        self.queue = queue
        self.client = client

    @overload
    def task(self, fn: Callable[..., Any], /) -> Task: ...
    @overload
    def task(
        self,
        fn: None = None,
        /,
        *,
        queue: str | None = None,
        resources: Mapping[str, str | int] | None = None,
        gpu: str | int | None = None,
        max_queued_time: str | float | None = None,
    ) -> Callable[[Callable[..., Any]], Task]: ...
    def task(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        queue: str | None = None,
        resources: Mapping[str, str | int] | None = None,
        gpu: str | int | None = None,
        max_queued_time: str | float | None = None,
    ) -> Task | Callable[[Callable[..., Any]], Task]:
        """The seed's `@env.task` and `@env.task(queue=...)`: store a template named after the
        function, in this environment. Sluice places work, it does not run it: the function's
        body is not sent anywhere."""

        def register(function: Callable[..., Any]) -> Task:
            return Task.create(
                function.__name__,
                queue=queue,
                environment_queue=self.queue,
                resources=resources,
                gpu=gpu,
                max_queued_time=max_queued_time,
                client=self.client,
            )

        return register if fn is None else register(fn)


class RunContext:
    """Settings of one run: `with_runcontext(queue="my-queue").run(main, count=10)`."""

    def __init__(self, queue: str | None, client: SluiceClient | None) -> None:
        self.queue = queue
        self.client = client

    def run(self, task: Task, *, count: int = 1, run: str | None = None) -> builtins.list[str]:
        """A new run of `count` invocations of `task`, created on this context's queue;
        returns the actions' ids. Its later submissions (`task.submit(run=...)`) inherit the
        queue."""
        run_id = run or f"run-{os.urandom(8).hex()}"
        specs = [task.spec(run=run_id, run_queue=self.queue) for _ in range(count)]
        return Action.submit_batch(specs, client=self.client or task.client)


def with_runcontext(*, queue: str | None = None, client: SluiceClient | None = None) -> RunContext:
    """The seed's `flyte.with_runcontext(queue=...)`."""
    return RunContext(queue, client)


def _create_or_update(client: SluiceClient, create: Call[Any], update: Call[Any]) -> str:
    """Send `create`; if the object exists, send `update` instead. Says which."""
    try:
        client.json(create)
        return "created"
    except AlreadyExists:
        client.json(update)
        return "updated"


class FleetConfig:
    """The fleet's configuration: queues put whole, clusters, organization settings and
    reusable environments."""

    @staticmethod
    def put_queue(queue: JSON, *, client: SluiceClient | None = None) -> str:
        """Create the queue, or update every setting given if it exists; says which."""
        update = Queues.update_from(queue["name"], _without(queue, "name"))
        return _create_or_update(_client(client), Queues.create_from(queue), update)

    @staticmethod
    def put_cluster(cluster: JSON, *, client: SluiceClient | None = None) -> JSON:
        return _client(client).json(Clusters.put(cluster))

    @staticmethod
    def clusters(*, client: SluiceClient | None = None) -> list[JSON]:
        return _client(client).json(Clusters.list())

    @staticmethod
    def get_cluster(name: str, *, client: SluiceClient | None = None) -> JSON:
        return _client(client).json(Clusters.get(name))

    @staticmethod
    def settings(*, client: SluiceClient | None = None) -> JSON:
        return _client(client).json(Organization.settings())

    @staticmethod
    def put_settings(settings: JSON, *, client: SluiceClient | None = None) -> JSON:
        return _client(client).json(Organization.put_settings(settings))

    @staticmethod
    def put_environment(environment: JSON, *, client: SluiceClient | None = None) -> JSON:
        return _client(client).json(Environments.put(environment))


# -- quota-managed job queues ------------------------------------------------------------------


class _Configured:
    """A kind of configuration kept by name, which the server refuses to delete while a job
    queue uses it."""

    _calls: ClassVar[type[SchedulingPolicies] | type[ServiceEnvironments]]

    @classmethod
    def get(cls, name: str, *, client: SluiceClient | None = None) -> JSON:
        return _client(client).json(cls._calls.get(name))

    @classmethod
    def list(cls, *, client: SluiceClient | None = None) -> builtins.list[JSON]:
        return _client(client).json(cls._calls.list())

    @classmethod
    def delete(cls, name: str, *, client: SluiceClient | None = None) -> None:
        """Raises FailedPrecondition while a job queue uses it."""
        _client(client).json(cls._calls.delete(name))


class SchedulingPolicy(_Configured):
    """Scheduling policies; a job queue with quota shares needs one with a quota share policy."""

    _calls = SchedulingPolicies

    @staticmethod
    def put(
        name: str, *, quota_share_policy: bool = True, client: SluiceClient | None = None
    ) -> JSON:
        """Create or replace `name`; with quota_share_policy (FIFO, AWS's only strategy) or not."""
        call = SchedulingPolicies.put(name, quota_share_policy=quota_share_policy)
        return _client(client).json(call)


class ServiceEnvironment(_Configured):
    """Service environments: the most instances of each type a job queue may use."""

    _calls = ServiceEnvironments

    @staticmethod
    def put(
        name: str,
        capacity_limits: dict[str, int],
        *,
        type: str | None = None,
        client: SluiceClient | None = None,
    ) -> JSON:
        """Create or replace `name`, e.g. `put("sagemaker-g5", {"ml.g5.xlarge": 3})`."""
        return _client(client).json(ServiceEnvironments.put(name, capacity_limits, type=type))


class QuotaShare:
    """The quota shares of a job queue: one share at a time (JobQueue.update replaces all)."""

    spec = staticmethod(QuotaShares.spec)

    @staticmethod
    @keywords(ShareOptions)
    def put(
        job_queue: str,
        name: str,
        capacity_limits: dict[str, int],
        strategy: str,
        *,
        client: SluiceClient | None = None,
        **options: Unpack[ShareOptions],
    ) -> JSON:
        """Add the share, or replace the one of this name; returns the job queue."""
        call = QuotaShares.put(job_queue, name, capacity_limits, strategy, **options)
        return _client(client).json(call)

    @staticmethod
    @keywords(ShareChanges)
    def update(
        job_queue: str,
        name: str,
        *,
        clear_borrow_limit: bool = False,
        client: SluiceClient | None = None,
        **changes: Unpack[ShareChanges],
    ) -> JSON:
        """Change some fields of a live share; `capacity_limits` replaces the share's map.

        A lowered limit makes what the share holds above it eligible for preemption."""
        call = QuotaShares.update(job_queue, name, clear_borrow_limit=clear_borrow_limit, **changes)
        return _client(client).json(call)

    @staticmethod
    def delete(job_queue: str, name: str, *, client: SluiceClient | None = None) -> None:
        """Remove a share without live jobs."""
        _client(client).json(QuotaShares.delete(job_queue, name))


class JobQueue:
    """Quota-managed job queues, shaped like Queue: create, update, details, list."""

    @staticmethod
    @keywords(JobQueueSettings)
    def create(
        name: str, *, client: SluiceClient | None = None, **settings: Unpack[JobQueueSettings]
    ) -> JSON:
        """Create a VALID job queue (shares from QuotaShare.spec); returns its details."""
        return _client(client).json(JobQueues.create(name, **settings))

    @staticmethod
    @keywords(JobQueueChanges)
    def update(
        name: str, *, client: SluiceClient | None = None, **changes: Unpack[JobQueueChanges]
    ) -> JSON:
        """Change a live job queue; `quota_shares` replaces every share."""
        return _client(client).json(JobQueues.update(name, **changes))

    @staticmethod
    def details(name: str, *, client: SluiceClient | None = None) -> JSON:
        """state, status, reason, max_capacity, usage and per share usage, borrowed, lent,
        line; the last tick's scheduled and preempted jobs."""
        return _client(client).json(JobQueues.details(name))

    @staticmethod
    def list(*, client: SluiceClient | None = None) -> list[JSON]:
        return _client(client).json(JobQueues.list())

    @staticmethod
    def delete(name: str, *, client: SluiceClient | None = None) -> None:
        """Raises FailedPrecondition while the queue holds live jobs."""
        _client(client).json(JobQueues.delete(name))

    @staticmethod
    def put(queue: JSON, *, client: SluiceClient | None = None) -> str:
        """Create the job queue, or update it if it exists (as in a scenario file); says which."""
        update = JobQueues.update_from(queue["name"], _without(queue, "name", "type"))
        return _create_or_update(_client(client), JobQueues.create_from(queue), update)


class Job(_Tracked):
    """Submitting SageMaker Training jobs to quota shares, and following them."""

    _calls = Jobs
    _noun = "job"
    _until = JOB_SETTLED
    _failed_and_done = JOB_FAILED_AND_DONE

    @staticmethod
    @keywords(JobSubmission)
    def submit(*, client: SluiceClient | None = None, **job: Unpack[JobSubmission]) -> JSON:
        """Queue one job in its share's line."""
        return _client(client).json(Jobs.submit(**job))

    @staticmethod
    def list(
        *,
        job_queue: str | None = None,
        share: str | None = None,
        state: str | None = None,
        limit: int = 100,
        client: SluiceClient | None = None,
    ) -> list[JSON]:
        call = Jobs.list(job_queue=job_queue, share=share, state=state, limit=limit)
        return _client(client).json(call)
