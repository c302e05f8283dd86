"""Fixtures of the service tests: an in-process service with manual ticks, and a real
`sluice serve` process on a loopback port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.service import Server, Service, service, start_server


@pytest.fixture
def svc(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Service]:
    """A service on the small east fleet with a database in tmp_path; a test's
    `@pytest.mark.service(cluster=None, period_s=...)` passes other settings."""
    marker = request.node.get_closest_marker("service")
    with service(tmp_path, **(marker.kwargs if marker else {})) as running:
        yield running


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A real `sluice serve` with an empty database, ticking every 0.1 s."""
    running = start_server(tmp_path / "sluice.db", period_s=0.1)
    try:
        yield running
    finally:
        running.stop()
