"""What storing the last tick's result costs, with 10,000 actions queued.

    .venv/bin/python -m bench.last_tick [--repeats 5] [--server postgresql://postgres@127.0.0.1:5432]

The snapshot is the synthetic M scenario (fixtures.generators.synthetic: 10,000 queued,
1,000 running, 50 queues), ticked once. Figures: the result's JSON size; the CPU seconds of
the leader's dump and of a follower's parse (time.process_time, this process only), as one
piece and as the stored lines (models.result.result_text), with the longest line's parse,
which is the longest a follower's requests wait behind it; and the
wall seconds of the write-back's update of the `last_tick` row with that JSON, against the
same update with the number alone, on a SQLite file (WAL, synchronous=FULL, as the store
opens it) and on PostgreSQL with the column compressed by pglz (the server's default) and
by lz4 (what schema 7 sets where the server has it), in the same run. Medians of --repeats.
"""

from __future__ import annotations

import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import psycopg

from bench.replicas import scratch_database
from fixtures.generators.synthetic import M, synthetic
from models.result import ResultPart, TickResult, read_result_text, result_text
from solver import TickOptions, tick

ROW = "CREATE TABLE last_tick (id INTEGER PRIMARY KEY, number INTEGER NOT NULL, result TEXT)"
UPDATE = "UPDATE last_tick SET number = number + 1, result = {mark} WHERE id = 1"


def _median(repeats: int, run: Callable[[], object], clock: Callable[[], float]) -> float:
    times = []
    for _ in range(repeats):
        started = clock()
        run()
        times.append(clock() - started)
    return statistics.median(times)


def _sqlite_update(path: Path) -> Callable[[str | None], None]:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(ROW)
    conn.execute("INSERT INTO last_tick VALUES (1, 0, NULL)")

    def update(result: str | None) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(UPDATE.format(mark="?"), (result,))
        conn.execute("COMMIT")

    return update


def _postgres_update(
    conn: psycopg.Connection[Any], compression: str
) -> Callable[[str | None], None]:
    conn.execute("DROP TABLE IF EXISTS last_tick")
    conn.execute(ROW)
    conn.execute(f"ALTER TABLE last_tick ALTER COLUMN result SET COMPRESSION {compression}")
    conn.execute("INSERT INTO last_tick VALUES (1, 0, NULL)")

    def update(result: str | None) -> None:
        with conn.transaction():
            conn.execute(UPDATE.format(mark="%s"), (result,))

    return update


def _writes(name: str, update: Callable[[str | None], None], body: str, repeats: int) -> None:
    bare = _median(repeats, lambda: update(None), time.perf_counter)
    full = _median(repeats, lambda: update(body), time.perf_counter)
    click.echo(
        f"{name:<17} write-back's row update: number alone {bare * 1000:.1f} ms,"
        f" with the result {full * 1000:.1f} ms ({full / bare:.1f}x)"
    )


@click.command()
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--server", default="postgresql://postgres@127.0.0.1:5432", show_default=True)
@click.option("--time-limit", type=float, default=2.0, show_default=True, help="The tick's (s).")
def main(repeats: int, server: str, time_limit: float) -> None:
    snapshot = synthetic(M)
    result = tick(snapshot, TickOptions(time_limit_s=time_limit))
    body = result.model_dump_json()
    dump = _median(repeats, result.model_dump_json, time.process_time)
    parse = _median(repeats, lambda: TickResult.model_validate_json(body), time.process_time)
    text = result_text(result)
    dump_lines = _median(repeats, lambda: result_text(result), time.process_time)
    parse_lines = _median(repeats, lambda: read_result_text(text), time.process_time)
    first, *parts = text.split("\n")

    def line_parse(line: str, model: type[TickResult | ResultPart]) -> float:
        return _median(repeats, lambda: model.model_validate_json(line), time.process_time)

    longest = max(
        [line_parse(first, TickResult), *(line_parse(line, ResultPart) for line in parts)]
    )
    click.echo(
        f"M: {len(snapshot.actions)} actions, the tick left {len(result.waiting)} waiting and"
        f" scheduled {len(result.scheduled)}; its result is {len(body) / 2**20:.2f} MiB of JSON"
    )
    click.echo(
        f"CPU, one piece: the leader's dump {dump * 1000:.0f} ms, a follower's parse"
        f" {parse * 1000:.0f} ms"
    )
    click.echo(
        f"CPU, {len(parts) + 1} lines: the leader's dump {dump_lines * 1000:.0f} ms, a follower's"
        f" parse {parse_lines * 1000:.0f} ms, its longest line {longest * 1000:.1f} ms"
    )
    with tempfile.TemporaryDirectory() as scratch:
        _writes("SQLite", _sqlite_update(Path(scratch) / "bench.db"), text, repeats)
    with scratch_database(server) as url, psycopg.connect(url, autocommit=True) as conn:
        for compression in ("pglz", "lz4"):  # the server's default, and what the store sets
            _writes(f"PostgreSQL {compression}", _postgres_update(conn, compression), text, repeats)


if __name__ == "__main__":
    main()
