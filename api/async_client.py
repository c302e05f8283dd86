"""The async client, for executors written with asyncio: the requests of api.calls over
`httpx.AsyncClient`, with the sync client's retries, `Retry-After`, errors and stream
reconnects (api.client's RetryPolicy, StreamCursor, EventReader and error_of).

    from api.async_client import AsyncSluiceClient
    from api.calls import Actions, Queues

    async with AsyncSluiceClient() as client:             # SLUICE_URL, SLUICE_TOKEN
        action = await client.send(Actions.submit(queue="research", resources={"cpu": "8"}))
        async for queue in client.events(Queues.watch("research")):
            print(queue.waiting, queue.head_blocked)
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import httpx

from api.calls import Actions, Call, Jobs, Queues, Stream
from api.client import (
    ACTION_FAILED_AND_DONE,
    ACTION_SETTLED,
    JOB_FAILED_AND_DONE,
    JOB_SETTLED,
    NEXT_PAGE_HEADER,
    STREAM_TIMEOUT,
    Connection,
    EventReader,
    RetryPolicy,
    Settling,
    StreamCursor,
    error_of,
)

if TYPE_CHECKING:
    from api.schemas.actions import ActionPublic
    from api.schemas.jobs import JobPublic

T = TypeVar("T")


class _Settles(Protocol):
    """An action or a job as a wait reads it."""

    @property
    def state(self) -> str: ...
    @property
    def code(self) -> str | None: ...
    @property
    def message(self) -> str | None: ...


S = TypeVar("S", bound=_Settles)


async def _settle(
    settling: Settling,
    fetch: Callable[[], Awaitable[S]],
    changes: Callable[[S], AsyncGenerator[Any, None]],
    timeout_s: float | None,
) -> S:
    """Fetch until it settles, again after each item of `changes(first found)`, all within
    `timeout_s` (the sync client's `_wait`, awaited)."""
    found = await fetch()
    try:
        async with asyncio.timeout(timeout_s):
            if settling.settled(found.state, found.code, found.message):
                return found
            following = changes(found)
            async with contextlib.aclosing(following):
                async for _ in following:
                    found = await fetch()
                    if settling.settled(found.state, found.code, found.message):
                        return found
    except TimeoutError:
        raise settling.timed_out(found.state, timeout_s or 0.0) from None
    raise AssertionError("unreachable: the changes end only by raising")


async def _every(poll_s: float) -> AsyncGenerator[None, None]:
    while True:
        await asyncio.sleep(poll_s)
        yield


class AsyncRetryTransport(httpx.AsyncBaseTransport):
    """An async httpx transport that retries as its RetryPolicy says (as RetryTransport)."""

    def __init__(
        self,
        inner: httpx.AsyncBaseTransport,
        retries: int = 3,
        backoff_s: float = 0.25,
        max_wait_s: float = 30.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.inner = inner
        self.policy = RetryPolicy(retries, backoff_s, max_wait_s)
        self.sleep = sleep

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        for attempt in range(self.policy.retries + 1):
            try:
                response = await self.inner.handle_async_request(request)
            except httpx.TransportError:
                wait = self.policy.after_error(attempt, request)
                if wait is None:
                    raise
                await self.sleep(wait)
                continue
            wait = self.policy.after_answer(attempt, response)
            if wait is None:
                return response
            await response.aclose()
            await self.sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def aclose(self) -> None:
        await self.inner.aclose()


class AsyncSluiceClient(Connection[httpx.AsyncClient]):
    """One async connection to a server; `send`, `send_page`, `events` and `request` as
    SluiceClient's, awaited."""

    def _connect(
        self, headers: dict[str, str], timeout_s: float, retries: int
    ) -> httpx.AsyncClient:
        transport = AsyncRetryTransport(httpx.AsyncHTTPTransport(retries=retries), retries)
        return httpx.AsyncClient(
            base_url=self.url, headers=headers, timeout=timeout_s, transport=transport
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncSluiceClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def send(self, call: Call[T]) -> T:
        """Send one request; return its answer as the server's model, or raise its error."""
        return call.read(await self.json(call))

    async def json(self, call: Call[Any]) -> Any:
        """Send one request; return the answer's JSON (None for an empty one)."""
        return await self.request(call.method, call.path, body=call.body, params=call.params)

    async def send_page(self, call: Call[builtins.list[T]]) -> tuple[builtins.list[T], str | None]:
        """One page of a listing, as models, and the next page's token (None on the last)."""
        response = await self._send("GET", call.path, None, call.params)
        return call.read(response.json()), response.headers.get(NEXT_PAGE_HEADER)

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        response = await self._send(method, path, body, params)
        return response.json() if response.content else None

    async def _send(
        self, method: str, path: str, body: Any, params: dict[str, Any] | None
    ) -> httpx.Response:
        try:
            response = await self._http.request(method, path, json=body, params=params)
        except httpx.HTTPError as error:
            raise self._unreachable(error) from None
        if response.is_error:
            raise error_of(response)
        return response

    async def wait_action(
        self,
        action_id: str,
        *,
        until: tuple[str, ...] = ACTION_SETTLED,
        timeout_s: float | None = None,
    ) -> ActionPublic:
        """The sync `Action.wait`, awaited: until the action reaches one of `until` (by
        default scheduled, running or succeeded), reading it again after each tick (its
        queue's watch stream), never polling. A failed one raises its code's exception
        (MaxQueuedTimeExceededError, Infeasible, ...); `timeout_s` bounds the whole wait,
        also while no tick comes, and then raises UNAVAILABLE."""
        settling = Settling(f"action {action_id}", until, ACTION_FAILED_AND_DONE)

        def ticks(found: ActionPublic) -> AsyncGenerator[Any, None]:
            watch = Queues.watch(found.queue)
            return self.stream(watch.path, watch.params)

        return await _settle(settling, lambda: self.send(Actions.get(action_id)), ticks, timeout_s)

    async def wait_job(
        self,
        job_id: str,
        *,
        until: tuple[str, ...] = JOB_SETTLED,
        timeout_s: float | None = None,
        poll_s: float = 0.5,
    ) -> JobPublic:
        """The sync `Job.wait`, awaited: until the job reaches one of `until` (by default
        SCHEDULED, STARTING, RUNNING or SUCCEEDED), read every `poll_s`; a failed one raises
        its code's exception, and `timeout_s` bounds the whole wait."""
        settling = Settling(f"job {job_id}", until, JOB_FAILED_AND_DONE)
        return await _settle(
            settling, lambda: self.send(Jobs.get(job_id)), lambda _: _every(poll_s), timeout_s
        )

    async def events(self, stream: Stream[T], *, reconnects: int = 5) -> AsyncIterator[T]:
        """A stream's events as models; reconnects as SluiceClient.stream does."""
        async for data in self.stream(stream.path, stream.params, reconnects=reconnects):
            yield stream.read(data)

    async def stream(
        self, path: str, params: dict[str, Any] | None = None, *, reconnects: int = 5
    ) -> AsyncGenerator[Any, None]:
        """The data of each server-sent event, decoded, across reconnects with
        `Last-Event-ID` (see SluiceClient.stream)."""
        cursor = StreamCursor(self.url, params, reconnects)
        while True:
            query, headers = cursor.request()
            problem = "the server closed it"
            reader = EventReader()
            try:
                async with self._http.stream(
                    "GET", path, params=query, headers=headers, timeout=STREAM_TIMEOUT
                ) as response:
                    if response.is_error:
                        await response.aread()
                        raise error_of(response)
                    async for line in response.aiter_lines():
                        event = reader.feed(line)
                        if event is None:
                            continue
                        done = cursor.seen(event[0])
                        yield event[1]
                        if done:
                            return
            except httpx.HTTPError as error:
                problem = str(error) or type(error).__name__
            await asyncio.sleep(cursor.dropped(problem))
