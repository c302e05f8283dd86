"""Server-sent events: one event per tick for one queue, or for every queue in some pools."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse

from api.deps import PrincipalDep, QueueName, StoreDep, TickerDep
from api.errors import error_responses
from api.ticker import TickLoop
from api.views import queue_view, queue_views
from models.errors import ResourceExhausted, SluiceError

router = APIRouter(prefix="/watch", tags=["watch"])

Limit = Annotated[
    int | None, Query(ge=1, description="stop after this many events (default: never)")
]


class Watchers:
    """The open streams, at most `limit`: each holds a thread for every event it renders,
    and the tick needs those threads too. Handlers run on the event loop, so a plain count
    needs no lock."""

    def __init__(self, limit: int, keepalive_s: float) -> None:
        self.limit = limit
        self.keepalive_s = keepalive_s
        self.open = 0

    def open_one(self) -> None:
        if self.open >= self.limit:
            raise ResourceExhausted(
                f"this server already streams to {self.limit} watchers, its limit; retry later"
                " or poll GET /queues"
            )
        self.open += 1

    def close_one(self) -> None:
        self.open -= 1


async def get_watchers(request: Request) -> Watchers:
    return request.app.state.watchers


WatchersDep = Annotated[Watchers, Depends(get_watchers)]


async def _events(
    event: str, render: Callable[[], str], ticker: TickLoop, limit: int | None, slot: Watchers
) -> AsyncIterator[str]:
    """The current state at once, then one event after every tick; between ticks a comment
    every keepalive_s, so a proxy does not cut an idle stream. Gives its slot back when the
    stream ends or the caller goes away."""
    try:
        seen = ticker.stats.last_number
        sent = 0
        while True:
            try:
                data = await asyncio.to_thread(render)
            except SluiceError as error:  # e.g. the watched queue was deleted
                yield f"event: error\ndata: {json.dumps(error.to_dict())}\n\n"
                return
            yield f"event: {event}\nid: {seen}\ndata: {data}\n\n"
            sent += 1
            if limit is not None and sent >= limit:
                return
            while True:
                try:
                    seen = await asyncio.wait_for(ticker.wait_for_tick(seen), slot.keepalive_s)
                    break
                except TimeoutError:
                    yield ": keep-alive\n\n"
    finally:
        slot.close_one()


def _stream(events: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def event_stream(event: str) -> dict[int | str, dict[str, Any]]:
    """The 200 response of a stream of `event`s: each event's fields, as OpenAPI describes
    `text/event-stream` (a schema per event, not one string for the whole stream)."""
    schema = {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {
                "type": "string",
                "enum": [event, "error"],
                "description": f"`{event}` once per tick; `error` when the stream must end",
            },
            "id": {"type": "string", "description": "the tick the event reports"},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "description": f"`{event}`: as described above; `error`: the error body, last",
            },
        },
    }
    return {
        200: {
            "description": "Server-sent events; each event's `id` is the tick it reports",
            "content": {"text/event-stream": {"schema": schema}},
        }
    }


@router.get(
    "/queues/{name}",
    response_class=StreamingResponse,
    responses={**event_stream("queue"), **error_responses(404, 429)},
)
async def watch_queue(
    name: QueueName,
    store: StoreDep,
    ticker: TickerDep,
    watchers: WatchersDep,
    _: PrincipalDep,
    limit: Limit = None,
) -> StreamingResponse:
    """`event: queue`, data: the queue's metrics (as GET /queues/{name}), once per tick.

    Over the server's limit of open streams: 429 RESOURCE_EXHAUSTED."""
    await asyncio.to_thread(store.get_queue, name)  # 404 now rather than inside the stream

    def render() -> str:
        return queue_view(store, ticker, name).model_dump_json()

    watchers.open_one()
    return _stream(_events("queue", render, ticker, limit, watchers))


@router.get(
    "/queues",
    response_class=StreamingResponse,
    responses={**event_stream("queues"), **error_responses(429)},
)
async def watch_pools(
    store: StoreDep,
    ticker: TickerDep,
    watchers: WatchersDep,
    _: PrincipalDep,
    pool: Annotated[list[str], Query(default_factory=list, description="all pools when omitted")],
    limit: Limit = None,
) -> StreamingResponse:
    """`event: queues`, data: a list of every live queue's metrics in the pools, per tick.

    Over the server's limit of open streams: 429 RESOURCE_EXHAUSTED."""

    def render() -> str:
        views = queue_views(store, ticker, pool)
        return json.dumps([view.model_dump(mode="json") for view in views])

    watchers.open_one()
    return _stream(_events("queues", render, ticker, limit, watchers))
