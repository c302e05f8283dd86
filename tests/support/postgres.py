"""A fresh PostgreSQL database per test run, and a fresh schema in it per test.

The machine runs PostgreSQL on 127.0.0.1:5432 with trust authentication for user
`postgres` (SLUICE_TEST_PG overrides the server's URL). Each run (each xdist worker) creates
its own database and drops it at the end, so runs never see each other's data; each test
gets an empty schema of it, named in the URL's search_path, so tests never see each
other's rows either.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import psycopg

SERVER = os.environ.get("SLUICE_TEST_PG", "postgresql://postgres@127.0.0.1:5432")

_schemas = itertools.count()


@contextmanager
def scratch_database() -> Iterator[str]:
    """A new database on the test server; its URL. Dropped afterwards."""
    name = f"sluice_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{SERVER}/{name}"
    finally:
        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def fresh_schema(database: str) -> str:
    """A new empty schema in `database`; the URL whose connections use it."""
    schema = f"t{next(_schemas)}"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{database}?options={quote(f'-csearch_path={schema}')}"
