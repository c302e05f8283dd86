"""`sluice whatif` and `sluice snapshot export`: offline what-if solves on Arrow snapshots.

    sluice whatif SNAPSHOT --set queue.research.max_accelerators.H100=64 \\
        --set queue.inference-eval.scheduling=strict_fifo --drop cluster east --out DIR
    sluice whatif sweep SNAPSHOT VARIANTS.yaml --out DIR [--executor ray [--address ADDR]]
    sluice snapshot export --from-scenario FILE --out PATH
    sluice snapshot export --from-server URL --out PATH

SNAPSHOT is an Arrow snapshot (a directory of table files, or a file of IPC
streams) or a scenario file. Outputs are staged in a temporary directory next
to --out and renamed into place at the end, so a failure writes nothing there.
Heavy imports (the solver, Arrow) happen inside the commands, keeping `sluice`
quick to start.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click

from api.cli.context import FiniteRange
from models.errors import InvalidInput, SluiceError, Unavailable, error_from_code
from models.snapshot import Snapshot

if TYPE_CHECKING:  # pyarrow loads only for the commands that write tables
    from models.arrow.tables import Format

TIME_LIMIT = click.option(
    "--time-limit",
    type=FiniteRange(min=0.01),
    default=5.0,
    show_default=True,
    help="Each tick's solver time limit in seconds.",
)
RESULT_FORMAT = click.option(
    "--format",
    "fmt",
    type=click.Choice(["arrow", "parquet"]),
    default="arrow",
    show_default=True,
    help="Write the tables as Arrow IPC files (.arrow) or Parquet (.parquet).",
)


# --- output that appears whole or not at all -----------------------------------------------------


def _check_free(out: Path) -> None:
    if out.exists() and not (out.is_dir() and not any(out.iterdir())):
        raise InvalidInput(f"{out}: already exists; give a new path or an empty directory")
    if not out.parent.is_dir():
        raise InvalidInput(f"{out.parent}: no such directory (for --out {out})")


@contextmanager
def staged(out: Path) -> Iterator[Path]:
    """A path to write instead of `out`; it becomes `out` only if the block succeeds."""
    _check_free(out)
    holder = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        target = holder / out.name
        yield target
        _check_free(out)
        try:
            os.replace(target, out)
        except OSError as error:
            raise InvalidInput(f"{out}: cannot write: {error.strerror}") from None
    finally:
        shutil.rmtree(holder, ignore_errors=True)


# --- sluice whatif --------------------------------------------------------------------------------


class _WhatifGroup(click.Group):
    """`whatif SNAPSHOT ...` runs one what-if (`whatif run`); `whatif sweep ...` runs a sweep."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_WhatifGroup)
def whatif() -> None:
    """What-if solves: change a snapshot, solve it and the baseline, compare.

    `sluice whatif SNAPSHOT --set ... --drop ...` compares one variant;
    `sluice whatif sweep SNAPSHOT VARIANTS.yaml` compares many in parallel.
    """


@whatif.command("run")
@click.argument("snapshot", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="PATH=VALUE",
    help="Change a queue field or cap (queue.NAME.FIELD[.KEY]=VALUE), a node pool's nodes or"
    " max_nodes (cluster.CLUSTER.POOL.FIELD=VALUE) or settings.default_gpu_type; VALUE null"
    " removes a cap.",
)
@click.option(
    "--drop",
    "drops",
    multiple=True,
    nargs=2,
    metavar="KIND NAME",
    help="Lose capacity: `cluster NAME` or `node_pool CLUSTER/POOL`; what ran there is queued"
    " again.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="Directory for the result and change tables (--format) and summary.txt.",
)
@RESULT_FORMAT
@TIME_LIMIT
def run_whatif(
    snapshot: Path,
    sets: tuple[str, ...],
    drops: tuple[tuple[str, str], ...],
    out: Path | None,
    fmt: Format,
    time_limit: float,
) -> None:
    """Solve SNAPSHOT as it is and with the changes; print and write the difference."""
    from solver import TickOptions
    from solver.whatif.compare import apply_changes, compare, load_snapshot, parse_changes

    if out is not None:
        _check_free(out)
    changes = parse_changes(sets, drops)
    if not changes:
        raise InvalidInput("give at least one --set or --drop")
    base = load_snapshot(snapshot)
    variant = apply_changes(base, changes)
    texts = [change.text for change in changes]
    comparison = compare(base, variant, TickOptions(time_limit_s=time_limit), texts)
    if out is not None:
        with staged(out) as target:
            comparison.write(target, fmt)
    click.echo(comparison.summary())


@whatif.command("sweep")
@click.argument("snapshot", type=click.Path(exists=True, path_type=Path))
@click.argument("variants", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    required=True,
    help="Directory for sweep.arrow, sweep_usage.arrow (or .parquet), summary.txt and each"
    " variant's tables.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=os.cpu_count() or 1,
    show_default="the machine's cores",
    help="Worker processes solving variants side by side; with --executor ray and no"
    " --address, the CPUs of the Ray instance started here.",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Where the solves run: worker processes here, or one Ray task per variant"
    " (needs the `ray` extra).",
)
@click.option(
    "--address",
    metavar="ADDR",
    help="With --executor ray: a running Ray cluster (`ray start --head` prints it);"
    " without it a local Ray instance is started for the sweep and stopped after.",
)
@RESULT_FORMAT
@TIME_LIMIT
def run_sweep(
    snapshot: Path,
    variants: Path,
    out: Path,
    workers: int,
    executor: str,
    address: str | None,
    fmt: Format,
    time_limit: float,
) -> None:
    """Solve the baseline and every variant of VARIANTS.yaml in parallel; compare them."""
    from solver import TickOptions
    from solver.whatif.executors import (
        LocalExecutor,
        RayExecutor,
        SweepExecutor,
        import_ray,
        on_loopback,
    )
    from solver.whatif.sweep import load_variants, sweep

    if address is not None and executor != "ray":
        raise InvalidInput("--address names a Ray cluster: it needs --executor ray")
    given = click.get_current_context().get_parameter_source("workers")
    if address is not None and given is not click.core.ParameterSource.DEFAULT:
        raise InvalidInput(
            "--workers does not apply with --address: the Ray cluster's CPUs decide how many"
            " solves run at once"
        )
    _check_free(out)
    listed = load_variants(variants)
    runner: SweepExecutor = LocalExecutor(workers)
    if executor == "ray":
        import_ray(on_loopback(address))  # a missing extra fails before any solve
        runner = RayExecutor(address, None if address else workers)
    options = TickOptions(time_limit_s=time_limit)
    with click.progressbar(length=len(listed) + 1, label="solving", file=sys.stderr) as bar:
        result = sweep(snapshot, listed, options, runner, lambda: bar.update(1))
    with staged(out) as target:
        result.write(target, fmt)
    click.echo(result.summary())


# --- sluice snapshot ------------------------------------------------------------------------------


@click.group("snapshot")
def snapshot_group() -> None:
    """Arrow snapshots: the whole input of one tick as Arrow tables."""


@snapshot_group.command("export")
@click.option(
    "--from-scenario",
    "scenario",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A scenario file (fixtures/*.yaml).",
)
@click.option("--from-server", "server", metavar="URL", help="A running service (GET /snapshot).")
@click.option("--token", envvar="SLUICE_TOKEN", help="Bearer token [env SLUICE_TOKEN].")
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Where to write.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["arrow", "parquet", "stream"]),
    default="arrow",
    show_default=True,
    help="A directory of Arrow IPC or Parquet files, or one file of IPC streams.",
)
def export(
    scenario: Path | None,
    server: str | None,
    token: str | None,
    out: Path,
    fmt: Literal["arrow", "parquet", "stream"],
) -> None:
    """Write a snapshot from a scenario file or a running service."""
    from models.arrow.tables import write_snapshot, write_snapshot_stream
    from models.scenario import load_scenario

    if (scenario is None) == (server is None):
        raise InvalidInput("give exactly one of --from-scenario FILE and --from-server URL")
    _check_free(out)
    taken = load_scenario(scenario) if scenario is not None else _fetch(str(server), token)
    with staged(out) as target:
        if fmt == "stream":
            with target.open("wb") as sink:
                write_snapshot_stream(taken, sink)
        else:
            write_snapshot(taken, target, fmt)
    click.echo(
        f"wrote {out}: {len(taken.actions)} actions, {len(taken.queues)} queues,"
        f" {len(taken.clusters)} clusters"
    )


def _fetch(url: str, token: str | None) -> Snapshot:
    """The service's snapshot (`GET URL/snapshot`, back-to-back Arrow IPC streams)."""
    import httpx

    from models.arrow.tables import STREAM_MEDIA_TYPE, read_snapshot_stream

    address = f"{url.rstrip('/')}/snapshot"
    headers = {"Accept": STREAM_MEDIA_TYPE}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        response = httpx.get(address, headers=headers, timeout=120.0)
    except httpx.HTTPError as error:
        raise Unavailable(f"cannot reach {address}: {error}") from None
    if response.status_code != 200:
        raise _http_error(address, response)
    return read_snapshot_stream(response.content, address)


def _http_error(address: str, response: Any) -> SluiceError:
    """The service's `{code, message}` error body as its SluiceError."""
    try:
        body = response.json()
        code, message = body["code"], body["message"]
    except (ValueError, KeyError, TypeError):
        return Unavailable(f"{address}: HTTP {response.status_code}")
    return error_from_code(code, f"{address}: {message}")
