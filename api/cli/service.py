"""`sluice serve` and `sluice solve`: the engine itself, as the tick service or one tick offline.

    sluice serve --demo                     REST API, tick loop and SQLite store
    sluice solve fixtures/seeds/eight-gpu-strict.yaml

Heavy imports (the service, the solver) happen inside the commands, keeping `sluice`
quick to start.
"""

from __future__ import annotations

import gc
import ipaddress
import json
import logging
from datetime import timedelta
from pathlib import Path

import click

from api.cli.context import FiniteRange
from api.cli.job_queues import quota_summary
from api.cli.render import tick_json, tick_summary
from api.config import ServiceSettings, TickWorker
from models.errors import InvalidInput
from models.fields import format_duration, parse_duration

_RECORD_FIELDS = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message"}


class JsonLogFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, and the record's extra fields
    (the tick loop's `tick` and the action ids it scheduled, failed or found stale)."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **{key: value for key, value in vars(record).items() if key not in _RECORD_FIELDS},
        }
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


# The guard's bounds: a body must hold at least one action with its containers, and a server
# that reads a gigabyte before refusing a body has no limit to speak of.
MIN_BODY_BYTES = 1024
MAX_BODY_BYTES = 2**30
# Each open stream takes a worker thread for every event it renders, as the tick does.
MAX_WATCHERS = 1024
# A comment more than once a second is noise; one every five minutes outlives every proxy.
MIN_KEEPALIVE_S = 1.0
MAX_KEEPALIVE_S = 300.0


def _default(setting: str) -> object:
    return ServiceSettings.model_fields[setting].default


def _help(setting: str) -> str:
    return ServiceSettings.model_fields[setting].description or ""


def _retain_for(_: click.Context, __: click.Parameter, value: str) -> timedelta | None:
    """`--retain-for`: a duration, or `forever`."""
    return None if value == "forever" else parse_duration(value, "retain-for")


def _retain_finished(_: click.Context, __: click.Parameter, value: str) -> int | None:
    """`--retain-finished`: a positive count, or `unlimited`."""
    if value == "unlimited":
        return None
    if not value.isdecimal() or int(value) < 1:
        raise InvalidInput(
            f"retain-finished: {value!r} is not a positive count (or unlimited)",
            field="retain-finished",
        )
    return int(value)


def _spelled_default(setting: str) -> str:
    """A retention default as its option spells it."""
    value = _default(setting)
    return format_duration(value) if isinstance(value, timedelta) else str(value)


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach `host`: 127.0.0.0/8, ::1 or localhost."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def _read_config_file(ctx: click.Context, _: click.Parameter, path: Path | None) -> Path | None:
    """`--config FILE`: a YAML mapping of serve's options (`db: /var/lib/sluice.db`,
    `period: 5`), below the command line and the environment."""
    if path is None:
        return None
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise InvalidInput(f"--config {path}: {error}", field="config") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"--config {path}: expected a mapping of options", field="config")
    known = {param.name for param in ctx.command.params if param.name != "config"}
    options = {str(key).replace("-", "_"): value for key, value in data.items()}
    unknown = sorted(set(options) - known)
    if unknown:
        raise InvalidInput(
            f"--config {path}: unknown options {', '.join(unknown)}; serve takes"
            f" {', '.join(sorted(str(name) for name in known))}",
            field="config",
        )
    ctx.default_map = {**(ctx.default_map or {}), **options}
    return path


@click.command(context_settings={"auto_envvar_prefix": "SLUICE", "show_default": True})
@click.option(
    "--config",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    is_eager=True,
    expose_value=False,
    callback=_read_config_file,
    help="YAML file of these options (db, port, period, ...); the command line and SLUICE_*"
    " variables override it.",
)
@click.option(
    "--db",
    default="sluice.db",
    show_default=True,
    help="Where all state is: a SQLite file (created if missing), or a PostgreSQL database"
    " as postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME, which many replicas share.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", type=int, default=8000, show_default=True, help="The port to listen on.")
@click.option("--period", type=FiniteRange(min=0.01), default=2.0, show_default=True,
              help="Seconds between ticks.")  # fmt: skip
@click.option("--time-limit", type=FiniteRange(min=0.01),
              help="The model's budget per tick [default: half the period].")  # fmt: skip
@click.option(
    "--tick-worker",
    type=click.Choice([kind.value for kind in TickWorker]),
    default=TickWorker.PROCESS.value,
    show_default=True,
    help=_help("tick_worker"),
)
@click.option("--tick-timeout", type=FiniteRange(min=1.0), help=_help("tick_timeout_s"))
@click.option("--demo", is_flag=True, help="Load a demo fleet and run a simulated executor.")
@click.option(
    "--auth",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="YAML file of bearer tokens and roles; without it the server runs open.",
)
@click.option(
    "--insecure",
    is_flag=True,
    help="Run open (every caller an admin) on a non-loopback --host, without --auth.",
)
@click.option(
    "--max-body-bytes",
    type=click.IntRange(min=MIN_BODY_BYTES, max=MAX_BODY_BYTES),
    default=_default("max_body_bytes"),
    show_default=True,
    help=_help("max_body_bytes"),
)
@click.option(
    "--max-watchers",
    type=click.IntRange(min=1, max=MAX_WATCHERS),
    default=_default("max_watchers"),
    show_default=True,
    help=_help("max_watchers"),
)
@click.option(
    "--watch-keepalive",
    type=FiniteRange(min=MIN_KEEPALIVE_S, max=MAX_KEEPALIVE_S),
    default=_default("watch_keepalive_s"),
    show_default=True,
    help=_help("watch_keepalive_s"),
)
@click.option(
    "--retain-for",
    default=_spelled_default("retain_finished_for"),
    show_default=True,
    callback=_retain_for,
    help="Delete finished actions and jobs this long after they finished (12h, 30d); forever"
    " keeps them. /metrics keeps counting what they counted.",
)
@click.option(
    "--retain-finished",
    default=_spelled_default("retain_finished"),
    show_default=True,
    callback=_retain_finished,
    help="Keep at most this many finished actions, the newest, and as many finished jobs;"
    " unlimited keeps any number.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    help="The least severe log records written.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: one object a line, with the tick number and action ids as fields.",
)
@click.option(
    "--full-gc-every",
    type=FiniteRange(min=0, max=86_400),
    default=600.0,
    show_default=True,
    help="Seconds between full garbage collections of the server process; between them its"
    " heap is frozen after each tick, so Python's own full collections (20-90 ms each with"
    " 10,000 queued) skip it; at most a day. 0 leaves collections to Python.",
)
@click.option(
    "--access-log/--no-access-log",
    default=True,
    show_default=True,
    help="A line per request (client, method, path, status) at info level; 6-14% of the"
    " server's CPU per submission. Off where a proxy in front logs requests already.",
)
def serve(
    db: str,
    host: str,
    port: int,
    period: float,
    time_limit: float | None,
    tick_worker: str,
    tick_timeout: float | None,
    demo: bool,
    auth: Path | None,
    insecure: bool,
    max_body_bytes: int,
    max_watchers: int,
    watch_keepalive: float,
    retain_for: timedelta | None,
    retain_finished: int | None,
    log_level: str,
    log_format: str,
    full_gc_every: float,
    access_log: bool,
) -> None:
    """Run the tick service: REST API (docs at /docs), tick loop, SQLite or PostgreSQL store.

    Every option can also be set from the environment as SLUICE_<OPTION> (SLUICE_DB,
    SLUICE_PORT, SLUICE_TIME_LIMIT, ...) or from a --config file; the effective
    configuration is printed at start.

    Without --auth every caller is an admin, so the server listens only on loopback
    unless --insecure is given. The store is opened (and a SQLite file locked, see
    api.store.backends) before the port is bound: a second server on the same file
    stops here with the pid of the one that holds it. Any number of servers may share
    one PostgreSQL database: each serves the whole API, and one at a time ticks.
    """
    if auth is None and not insecure and not is_loopback(host):
        raise InvalidInput(
            f"--host {host}: without --auth every caller is an admin, so Sluice listens"
            " only on loopback (127.0.0.1, ::1, localhost); give --auth FILE, or"
            " --insecure to run open anyway",
            field="host",
        )
    # Imported here so that client commands start fast.
    import uvicorn

    from api.app import create_app
    from api.store.backends import shown_target
    from api.store.sql_store import SqlStore

    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonLogFormatter()
        if log_format == "json"
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    logging.basicConfig(level=log_level.upper(), handlers=[handler])
    settings = ServiceSettings(
        database=db,
        period_s=period,
        tick_time_limit_s=time_limit,
        tick_worker=TickWorker(tick_worker),
        tick_timeout_s=tick_timeout,
        auth_file=auth,
        max_body_bytes=max_body_bytes,
        max_watchers=max_watchers,
        watch_keepalive_s=watch_keepalive,
        retain_finished_for=retain_for,
        retain_finished=retain_finished,
        full_collection_every_s=full_gc_every or None,
        demo=demo,
    )
    effective = {
        "db": shown_target(db), "host": host, "port": port, "period": period,
        "time_limit": settings.time_limit_s, "tick_worker": tick_worker,
        "tick_timeout": settings.timeout_s, "demo": demo, "auth": auth, "insecure": insecure,
        "max_body_bytes": max_body_bytes,
        "max_watchers": max_watchers, "watch_keepalive": watch_keepalive,
        "retain_for": format_duration(retain_for) if retain_for else "forever",
        "retain_finished": retain_finished or "unlimited",
        "log_level": log_level, "log_format": log_format, "access_log": access_log,
        "full_gc_every": full_gc_every or "python",
    }  # fmt: skip
    # No option holds a secret (the tokens stay in the --auth file), so all are printed.
    click.echo("config: " + " ".join(f"{k}={v}" for k, v in effective.items()), err=True)
    store = SqlStore(db)
    try:
        app = create_app(settings, store=store)
        access = f"tokens from {auth}" if auth else "OPEN: no --auth, every caller is an admin"
        click.echo(
            f"Sluice on http://{host}:{port} (API docs at /docs), state in {shown_target(db)},"
            f" {access}",
            err=True,
        )
        # What start-up made (modules, classes, the app: 130,000 objects) lives as long as
        # the process; frozen, no full collection walks it again (each walked 300,000
        # objects at 10,000 queued, 0.25 s of the server's CPU). Frozen objects are still
        # freed when their last reference goes.
        gc.collect()
        gc.freeze()
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level=log_level,
            access_log=access_log,
            timeout_graceful_shutdown=3,
            # In json, uvicorn's loggers go through the root handler above, not their own.
            log_config=None if log_format == "json" else uvicorn.config.LOGGING_CONFIG,
        )
    finally:
        store.close()


@click.command("solve")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="The TickResult as JSON.")
@click.option(
    "--time-limit",
    type=FiniteRange(min=0.01),
    default=5.0,
    show_default=True,
    help="The solver's time limit for the tick, in seconds.",
)
def solve_scenario(path: Path, as_json: bool, time_limit: float) -> None:
    """Run one tick offline on a snapshot and print its decisions.

    PATH is a scenario file (.yaml, .yml, .json) or an Arrow snapshot (a directory of IPC or
    Parquet files, or one file of IPC streams), as `sluice whatif` reads. With --json the
    top-level keys are scheduled, failed, waiting, queues, solver and quota (the job queues'
    part: scheduled, preempted, waiting, failed, job_queues).
    """
    from solver import TickOptions, tick
    from solver.whatif.compare import load_snapshot

    result = tick(load_snapshot(path), TickOptions(time_limit_s=time_limit))
    click.echo(tick_json(result) if as_json else tick_summary(result))
    if result.quota and not as_json:
        click.echo(quota_summary(result.quota))
