"""The FastAPI application: `create_app(settings)` wires the store, the tick loop and routers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.routing import APIRoute

from api.auth import Authenticator
from api.cleanup import Cleanup
from api.config import ServiceSettings
from api.deps import reject_unknown_query
from api.errors import document_errors, install_error_handlers
from api.explanation_cache import ActionExplanations
from api.guard import OPEN_PATHS, RequestGuard
from api.heap import QuietHeap
from api.metrics import ServiceMetrics
from api.routes import (
    actions,
    clusters,
    environments,
    explanations,
    job_queues,
    jobs,
    ops,
    queues,
    tasks,
    triggers,
    watch,
)
from api.routes import settings as org_settings
from api.solver_process import start_solves
from api.store.backends import shown_target
from api.store.records import Retention, Store
from api.store.sql_store import SqlStore
from api.submissions import GroupCommit
from api.tick_work import HeadExplaining, TickFn, service_forecast, solver_tick, worker_ready
from api.ticker import TickLoop
from api.web import routes as web
from solver import TickOptions

log = logging.getLogger("sluice.api")


def operation_id(route: APIRoute) -> str:
    """The handler's name in camelCase (`createQueue`): stable, and what client generators
    turn into method names."""
    first, *rest = route.name.split("_")
    return first + "".join(word.capitalize() for word in rest)


def create_app(
    settings: ServiceSettings, *, tick_fn: TickFn | None = None, store: Store | None = None
) -> FastAPI:
    """The tick service. `tick_fn` replaces the real engine in tests.

    A `store` given is the caller's to close (`sluice serve` opens it before binding the
    port, so a locked file stops it early). Otherwise the store opens in the lifespan,
    where the tick loop starts too, so a TestClient used as a context manager runs the
    whole service in-process.
    """
    authenticator = Authenticator.from_file(settings.auth_file)  # a bad file fails here

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.store = store or await asyncio.to_thread(SqlStore, settings.database)
        app.state.submissions = GroupCommit(app.state.store)
        # Explanations get the service's model budget and no wall-clock guard, so their
        # answers do not depend on the load.
        explain_options = TickOptions(time_limit_s=settings.time_limit_s)
        # A worker reads the store's database itself (a reader-only connection); another
        # kind of store's snapshot is read here and sent to it.
        database = app.state.store.target if isinstance(app.state.store, SqlStore) else None
        tick_solves = start_solves(settings.tick_worker, "tick", settings.timeout_s)
        explain_solves = start_solves(settings.tick_worker, "explanation", settings.timeout_s)
        # Spawned now, importing the solver while the server starts, rather than at the first
        # tick or explanation (not awaited: under load that wait outlasted start-up bounds).
        for solves in (tick_solves, explain_solves):
            solves.warm(worker_ready)
        app.state.ticker = TickLoop(
            app.state.store,
            tick_fn or solver_tick(settings.time_limit_s, settings.wall_guard_s),
            settings.period_s,
            HeadExplaining(explain_options, settings.head_explain_budget_s),
            tick_solves,
            database if tick_solves.copies else None,
            # A replaced engine's results need not be the engine's, so nothing to replay.
            None if tick_fn else service_forecast(settings.period_s, settings.time_limit_s),
        )
        if settings.full_collection_every_s is not None:
            app.state.ticker.on_tick.append(QuietHeap(settings.full_collection_every_s).after_tick)
        app.state.explanations = ActionExplanations(
            app.state.store,
            app.state.ticker,
            explain_solves,
            explain_options,
            database if explain_solves.copies else None,
        )
        app.state.metrics = ServiceMetrics(
            app.state.store, app.state.ticker, app.state.explanations
        )
        retention = Retention(settings.retain_finished_for, settings.retain_finished)
        cleanup = Cleanup(app.state.store, retention, settings.retention_check_s)
        stoppable = (app.state.ticker, cleanup)  # they finish what they write, then end
        background = [
            asyncio.create_task(app.state.ticker.run_forever(), name="tick-loop"),
            asyncio.create_task(cleanup.run_forever(), name="cleanup"),
        ]
        if settings.demo:
            from api.demo import DemoExecutor, load_demo_fleet

            await asyncio.to_thread(load_demo_fleet, app.state.store)
            executor = DemoExecutor(app.state.store, seed=settings.demo_seed)
            background.append(asyncio.create_task(executor.run_forever(), name="demo-executor"))
        if authenticator.open:
            log.warning("no auth file given: the server runs OPEN, every caller is an admin")
        else:
            log.info("auth: bearer tokens from %s", settings.auth_file)
        log.info(
            "tick service on %s: a tick every %.2f s, solver limit %.2f s, solving in a %s%s",
            shown_target(str(settings.database)),
            settings.period_s,
            settings.time_limit_s,
            settings.tick_worker.value,
            ", demo executor running" if settings.demo else "",
        )
        try:
            yield
        finally:
            for loop in stoppable:
                loop.stop()
            for task in background[len(stoppable) :]:
                task.cancel()
            for task in background:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            tick_solves.close()
            explain_solves.close()
            if store is None:
                app.state.store.close()

    app = FastAPI(
        title="Sluice",
        summary="Batch admission and placement: capped queues, solved as one model per tick.",
        version="0.1.0",
        lifespan=lifespan,
        # The dashboard's router serves both docs pages with local assets (no CDN).
        docs_url=None,
        redoc_url=None,
        dependencies=[Depends(reject_unknown_query)],
        generate_unique_id_function=operation_id,
    )
    app.state.watchers = watch.Watchers(settings.max_watchers, settings.watch_keepalive_s)
    app.add_middleware(
        RequestGuard, authenticator=authenticator, max_body_bytes=settings.max_body_bytes
    )
    install_error_handlers(app)
    document_errors(app, OPEN_PATHS)
    routers = (
        queues,
        actions,
        clusters,
        org_settings,
        environments,
        watch,
        ops,
        explanations,
        triggers,
    )
    for module in routers:
        app.include_router(module.router)
    app.include_router(tasks.router)  # task templates, routing a submission to its queue
    for router in (*job_queues.routers, jobs.router):  # quota-managed job queues
        app.include_router(router)
    app.include_router(web.router)  # the dashboard at /
    app.include_router(web.data_router)
    return app
