"""How long PostgreSQL lets a transaction sit idle: a write holds every replica's write lock,
so it is ended soon (a paused replica cannot stall the others); a read holds no such lock and
is left alone far longer, so a disk stall on a loaded machine does not end healthy reads."""

from __future__ import annotations

import threading
import time

import pytest

from api.store.backends import IDLE_IN_READ_S, IDLE_IN_TRANSACTION_S, open_backend
from tests.support.postgres import fresh_schema

IDLE_S = IDLE_IN_TRANSACTION_S + 1.0


@pytest.mark.slow
def test_an_idle_write_is_ended_and_an_idle_read_is_not(postgres_database: str) -> None:
    """Issue 13: "Partition test: pause the leader (SIGSTOP) long enough for its lease to
    pass, let another replica tick, resume it". A replica paused inside a write holds every
    replica's write lock: it is free again within the write limit, while a read left idle for
    as long still answers (a disk stall must not end it)."""
    assert IDLE_S < IDLE_IN_READ_S
    backend = open_backend(fresh_schema(postgres_database))
    try:
        holding = threading.Event()
        ended: list[BaseException] = []

        def idle_writer() -> None:
            try:
                with backend.transaction() as conn:
                    conn.execute("SELECT 1")
                    holding.set()
                    time.sleep(IDLE_S + 1.0)
                    conn.execute("SELECT 1")
            except Exception as error:  # the server ended it: what this test expects
                ended.append(error)

        writer = threading.Thread(target=idle_writer)
        writer.start()
        assert holding.wait(10)
        with backend.read() as reading:
            reading.execute("SELECT 1")
            started = time.monotonic()
            with backend.transaction() as conn:  # waits on the idle writer's lock
                conn.execute("SELECT 1")
            waited = time.monotonic() - started
            time.sleep(max(0.0, IDLE_S - waited))
            assert reading.execute("SELECT 1").fetchone() == (1,)
        writer.join()
        assert waited < IDLE_S + 1.0
        assert ended, "the idle write transaction was not ended"
    finally:
        backend.close()
