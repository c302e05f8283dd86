"""Health and Prometheus metrics."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel

from api.deps import PrincipalDep, StoreDep, TickerDep
from api.metrics import render_metrics, render_quota_metrics
from api.views import job_queue_views, queue_views
from models.arrow.tables import STREAM_MEDIA_TYPE, write_snapshot_stream
from models.fields import Timestamp

router = APIRouter(tags=["ops"])


class Health(BaseModel):
    status: str  # "ok", or "degraded" when the last tick failed
    ticks: int
    last_tick_at: Timestamp | None
    last_tick_s: float
    last_error: str | None


@router.get("/healthz", responses={503: {"model": Health}})
def healthz(ticker: TickerDep) -> JSONResponse:
    """No token needed. 503 while the last tick failed."""
    stats = ticker.stats
    health = Health(
        status="degraded" if stats.last_error else "ok",
        ticks=stats.ticks,
        last_tick_at=stats.last_finished_at,
        last_tick_s=stats.last_duration_s,
        last_error=stats.last_error,
    )
    return JSONResponse(
        health.model_dump(mode="json"), status_code=503 if stats.last_error else 200
    )


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(store: StoreDep, ticker: TickerDep, _: PrincipalDep) -> PlainTextResponse:
    """Usage and cap per queue and resource, waiting and blocked counts, tick duration.

    Any token may scrape it."""
    return PlainTextResponse(
        render_metrics(queue_views(store, ticker), ticker.stats)
        + render_quota_metrics(job_queue_views(store, ticker)),
        media_type="text/plain; version=0.0.4",
    )


@router.get("/snapshot", response_class=Response)
def snapshot(store: StoreDep, _: PrincipalDep) -> Response:
    """The input of a tick as of now, as Arrow IPC streams (see `sluice snapshot export`)."""
    body = io.BytesIO()
    write_snapshot_stream(store.read_snapshot(datetime.now(UTC)), body)
    return Response(body.getvalue(), media_type=STREAM_MEDIA_TYPE)
