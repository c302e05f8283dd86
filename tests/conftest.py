"""Fixtures every test package shares: the databases a store runs on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.replicas import scratch_database
from tests.support.postgres import SERVER, fresh_schema


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--random-seeds",
        metavar="FIRST:STOP",
        help="walk these seeds of the random explanation sweeps instead of CI's"
        " (tests/solver/explain/test_random.py, slow): every seed from FIRST up to STOP",
    )


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """This run's own PostgreSQL database (dropped at the end)."""
    with scratch_database(SERVER) as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database for a store, on each backend in turn: a SQLite file's path, or a
    postgresql:// URL of a fresh schema."""
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    return fresh_schema(request.getfixturevalue("postgres_database"))
