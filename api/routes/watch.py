"""Server-sent events: one event per tick for one queue, or for every queue in some pools."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from api.deps import PrincipalDep, StoreDep, TickerDep
from api.ticker import TickLoop
from api.views import queue_view, queue_views
from models.errors import SluiceError

router = APIRouter(prefix="/watch", tags=["watch"])

Limit = Annotated[
    int | None, Query(ge=1, description="stop after this many events (default: never)")
]


async def _events(
    event: str, render: Callable[[], str], ticker: TickLoop, limit: int | None
) -> AsyncIterator[str]:
    """The current state at once, then one event after every tick."""
    seen = ticker.stats.ticks
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
        seen = await ticker.wait_for_tick(seen)


def _stream(events: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@router.get("/queues/{name}", response_class=StreamingResponse)
async def watch_queue(
    name: str, store: StoreDep, ticker: TickerDep, _: PrincipalDep, limit: Limit = None
) -> StreamingResponse:
    """`event: queue`, data: the queue's metrics (as GET /queues/{name}), once per tick."""
    await asyncio.to_thread(store.get_queue, name)  # 404 now rather than inside the stream

    def render() -> str:
        return queue_view(store, ticker, name).model_dump_json()

    return _stream(_events("queue", render, ticker, limit))


@router.get("/queues", response_class=StreamingResponse)
async def watch_pools(
    store: StoreDep,
    ticker: TickerDep,
    _: PrincipalDep,
    pool: Annotated[list[str] | None, Query(description="all pools when omitted")] = None,
    limit: Limit = None,
) -> StreamingResponse:
    """`event: queues`, data: a list of every live queue's metrics in the pools, per tick."""

    def render() -> str:
        views = queue_views(store, ticker, pool)
        return json.dumps([view.model_dump(mode="json") for view in views])

    return _stream(_events("queues", render, ticker, limit))
