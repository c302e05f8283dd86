"""A fresh schema per test in the run's own PostgreSQL database (bench.replicas.
scratch_database makes it, tests/conftest.py holds it for the run).

The machine runs PostgreSQL on 127.0.0.1:5432 with trust authentication for user
`postgres` (SLUICE_TEST_PG overrides the server's URL). Each run (each xdist worker) creates
its own database and drops it at the end, so runs never see each other's data; each test
gets an empty schema of it, named in the URL's search_path, so tests never see each
other's rows either.
"""

from __future__ import annotations

import itertools
import os
from urllib.parse import quote

import psycopg

SERVER = os.environ.get("SLUICE_TEST_PG", "postgresql://postgres@127.0.0.1:5432")

_schemas = itertools.count()


def fresh_schema(database: str) -> str:
    """A new empty schema in `database`; the URL whose connections use it."""
    schema = f"t{next(_schemas)}"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{database}?options={quote(f'-csearch_path={schema}')}"
