"""Health and Prometheus metrics."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client.exposition import choose_encoder
from pydantic import BaseModel, Field

from api.deps import PrincipalDep, StoreDep, TickerDep
from api.explanation_cache import ActionExplanations
from api.metrics import ServiceMetrics
from models.arrow.tables import STREAM_MEDIA_TYPE, write_snapshot_stream
from models.fields import Timestamp

router = APIRouter(tags=["ops"])


class Health(BaseModel):
    status: str = Field(description='"ok", or "degraded" when the last tick failed.')
    ticks: int = Field(description="Ticks this replica wrote back since it started.")
    last_tick: int = Field(description="The last tick any leader wrote back (its number).")
    last_tick_at: Timestamp | None = Field(description="When any leader wrote it back.")
    last_tick_s: float = Field(description="Seconds the last tick took.")
    last_error: str | None = Field(description="Why the last tick failed; null when it did not.")
    worker_pid: int | None = Field(
        description="the process that solved the last tick (the server's own in thread mode)"
    )
    leading: bool = Field(description="Whether this replica holds the leader lease and ticks.")
    epoch: int | None = Field(
        description="The lease epoch this replica leads at; null while another replica leads."
    )


@router.get("/healthz", responses={503: {"model": Health}})
def healthz(ticker: TickerDep) -> JSONResponse:
    """No token needed. 503 while the last tick failed."""
    stats = ticker.stats
    epoch = ticker.leadership.current()
    health = Health(
        status="degraded" if stats.last_error else "ok",
        ticks=stats.ticks,
        last_tick=stats.last_number,
        last_tick_at=stats.last_finished_at,
        last_tick_s=stats.last_duration_s,
        last_error=stats.last_error,
        worker_pid=stats.worker_pid,
        leading=epoch is not None,
        epoch=epoch,
    )
    return JSONResponse(
        health.model_dump(mode="json"), status_code=503 if stats.last_error else 200
    )


class Readiness(BaseModel):
    ready: bool = Field(
        description="Whether this replica is ready for traffic: its solver workers have started"
        " and it shows a tick."
    )
    workers_ready: bool = Field(
        description="Whether the tick and explanation workers have answered a first call (a"
        " worker imports the solver at start, which takes seconds)."
    )
    last_tick: int = Field(
        description="The tick this replica shows (its own, or the last any leader wrote back);"
        " 0 until it has one."
    )


@router.get("/readyz", responses={503: {"model": Readiness}})
def readyz(request: Request, ticker: TickerDep) -> JSONResponse:
    """No token needed. 503 until this replica's solver workers have started and it shows a
    tick: its own first one, or while another replica leads, the last one any leader wrote
    back. Once ready it stays ready (a failed tick is /healthz's to say)."""
    explanations: ActionExplanations = request.app.state.explanations
    workers = ticker.solves.ready and explanations.solves.ready
    readiness = Readiness(
        ready=workers and ticker.stats.last_number > 0,
        workers_ready=workers,
        last_tick=ticker.stats.last_number,
    )
    return JSONResponse(readiness.model_dump(), status_code=200 if readiness.ready else 503)


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text, or OpenMetrics on request",
            "content": {
                "text/plain": {"schema": {"type": "string"}},
                "application/openmetrics-text": {"schema": {"type": "string"}},
            },
        }
    },
)
def metrics(request: Request, _: PrincipalDep) -> Response:
    """Prometheus text, or OpenMetrics when the scraper asks for it (docs/http-api.md#metrics).

    Any token may scrape it."""
    service_metrics: ServiceMetrics = request.app.state.metrics
    encode, media_type = choose_encoder(request.headers.get("accept", ""))
    return Response(encode(service_metrics.registry), media_type=media_type)


@router.get(
    "/snapshot",
    response_class=Response,
    responses={
        200: {
            "description": "Arrow IPC streams (docs/arrow)",
            "content": {STREAM_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
        }
    },
)
def snapshot(store: StoreDep, _: PrincipalDep) -> Response:
    """The input of a tick as of now, as Arrow IPC streams (see `sluice snapshot export`)."""
    body = io.BytesIO()
    write_snapshot_stream(store.read_snapshot(datetime.now(UTC)), body)
    return Response(body.getvalue(), media_type=STREAM_MEDIA_TYPE)
