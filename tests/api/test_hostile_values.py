"""Hostile quantities, durations and integers at every boundary: the HTTP API, the CLI on a
scenario file (YAML), and Arrow snapshot tables. Each gives a clear error or a valid tick,
never an exception."""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.cli.main import main
from fixtures import FIXTURES
from models.arrow.tables import read_snapshot, snapshot_tables, write_tables
from models.errors import InvalidInput
from models.scenario import load_scenario
from solver import TickOptions, tick
from tests.support.service import Service, service

EXAMPLE = FIXTURES / "issue-example.yaml"
QUICK = 30
SWEEP = 300

SPELLINGS = [
    "1e400", "-1e400", "1e-400", "1e999999999", "8Ei", "99999999999Ti", "99999999999d",
    "1Zi", "1Yi", "-5", "-0", "0", "nan", "NaN", "inf", "-inf", "Infinity", "0x10", "1_000",
    "1.5.5", "", " ", "Ti", "m", "10 m", "1e3Mi", "1.5Gi", "1/2", "١٢٣", "５", "²", "৩Gi",
    "12\u200b3", "1\x00", "H100:99999999999999999999", "H100:-1", "H100:nan", ":",
    "99999999999999999999s",
    "1h30", "P1D", "1w", "-1s", "1000000000000000000000000000000m", "9" * 5000,
]  # fmt: skip
"""Spellings that have broken parsers: overflow, signs, non-ASCII digits, odd suffixes."""

scalar = st.one_of(
    st.integers(),
    st.sampled_from([2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 2**70, -1]),
    st.floats(),  # nan, inf, subnormals, huge
    st.sampled_from(SPELLINGS),
    st.text(max_size=30),
    st.booleans(),
    st.none(),
)
hostile = st.recursive(
    scalar,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
"""A value where a quantity, duration or integer belongs: scalars and nested garbage."""


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


# --- HTTP ---------------------------------------------------------------------------------------

ids = itertools.count()

HTTP_TARGETS: dict[str, Callable[[Any], tuple[str, str, dict[str, Any]]]] = {
    "action cpu": lambda v: _action({"containers": [{"resources": {"cpu": v}}]}),
    "action memory": lambda v: _action({"containers": [{"resources": {"cpu": 1, "memory": v}}]}),
    "action gpu": lambda v: _action({"containers": [{"resources": {"cpu": 1}, "gpu": v}]}),
    "action max_queued_time": lambda v: _action({"max_queued_time": v}),
    "action deadline": lambda v: _action({"deadline": v}),
    "queue depth": lambda v: _queue({"depth": v}),
    "queue priority": lambda v: _queue({"priority": v}),
    "queue max_gpus": lambda v: _queue({"max_gpus": v}),
    "queue run_concurrency": lambda v: _queue({"run_concurrency": v}),
    "queue max_resources": lambda v: _queue({"max_resources": {"cpu": v}}),
    "pool nodes": lambda v: _pool({"nodes": v}),
    "pool max_nodes": lambda v: _pool({"max_nodes": v}),
    "pool node cpu": lambda v: _pool({"node": {"cpu": v, "memory": "64Gi"}}),
    "pool node memory": lambda v: _pool({"node": {"cpu": "8", "memory": v}}),
    "pool accelerators": lambda v: _pool(
        {"node": {"cpu": "8", "memory": "64Gi", "accelerator": "H100", "accelerators": v}}
    ),
}


def _action(fields: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    body = {"id": f"hostile-{next(ids)}", "containers": [{"resources": {"cpu": 1}}], **fields}
    return "POST", "/actions", body


def _queue(fields: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    return "POST", "/queues", {"name": f"hostile-{next(ids)}", **fields}


def _pool(fields: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    pool = {"name": "p", "node": {"cpu": "8", "memory": "64Gi"}, "nodes": 1, **fields}
    return "PUT", "/clusters/hostile", {"name": "hostile", "node_pools": [pool]}


def _over_http(svc: Service, target: str, value: Any) -> None:
    method, path, body = HTTP_TARGETS[target](value)
    # Python's json writes nan and infinities as NaN and Infinity, as a careless client would.
    content = json.dumps(body).encode()
    headers = {"content-type": "application/json"}
    response = svc.http.request(method, path, content=content, headers=headers)
    assert response.status_code in (200, 201, 400, 409), (target, value, response.text)
    if response.status_code == 400:
        error = response.json()
        assert error["code"] == "INVALID_ARGUMENT" and error["field"], (target, value, error)
    elif response.status_code == 409:  # a value in range the fleet's state refuses
        assert response.json()["code"] == "FAILED_PRECONDITION", (target, value, response.text)
    failures = svc.app.state.ticker.stats.failures
    svc.tick()
    assert svc.app.state.ticker.stats.failures == failures, (target, value)
    assert svc.ok("GET", "/healthz")["status"] == "ok", (target, value)


def _http_run(tmp_path: Path, examples: int) -> None:
    with service(tmp_path) as svc:

        @_settings(examples)
        @given(target=st.sampled_from(sorted(HTTP_TARGETS)), value=hostile)
        def run(target: str, value: Any) -> None:
            _over_http(svc, target, value)

        run()


def test_hostile_values_over_http_give_400_or_a_tick(tmp_path: Path) -> None:
    """Issue: "a property test that feeds random quantities, durations and integers at every
    boundary (HTTP, CLI, YAML, Arrow) and asserts: a clear error or a valid tick, never an
    exception." """
    _http_run(tmp_path, QUICK)


@pytest.mark.slow
def test_hostile_values_over_http_sweep(tmp_path: Path) -> None:
    """As the quick test above, with more examples."""
    _http_run(tmp_path, SWEEP)


# --- the CLI on YAML scenario files -------------------------------------------------------------

SCENARIO = yaml.safe_load(EXAMPLE.read_text())
YAML_TARGETS: dict[str, tuple[str | int, ...]] = {
    "queue depth": ("queues", 0, "depth"),
    "queue priority": ("queues", 0, "priority"),
    "queue max_gpus": ("queues", 0, "max_gpus"),
    "queue action_concurrency": ("queues", 0, "action_concurrency"),
    "queue max_resources": ("queues", 0, "max_resources", "memory"),
    "queue max_accelerators": ("queues", 0, "max_accelerators", "H100"),
    "pool nodes": ("clusters", 0, "node_pools", 0, "nodes"),
    "pool max_nodes": ("clusters", 0, "node_pools", 0, "max_nodes"),
    "pool node cpu": ("clusters", 0, "node_pools", 0, "node", "cpu"),
    "pool accelerators": ("clusters", 0, "node_pools", 0, "node", "accelerators"),
    "action max_queued_time": ("actions", 1, "max_queued_time"),
    "action deadline": ("actions", 1, "deadline"),
    "action cpu": ("actions", 1, "containers", 0, "resources", "cpu"),
    "action gpu": ("actions", 1, "containers", 0, "resources", "gpu"),
    "now": ("now",),
}


def _planted(path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    scenario = copy.deepcopy(SCENARIO)
    where: Any = scenario
    for key in path[:-1]:
        where = where[key]
    where[path[-1]] = value
    return scenario


def _over_cli(tmp_path: Path, target: str, value: Any) -> None:
    file = tmp_path / "hostile.yaml"
    file.write_text(yaml.safe_dump(_planted(YAML_TARGETS[target], value), allow_unicode=True))
    result = CliRunner().invoke(main, ["solve", str(file), "--json", "--time-limit", "0.5"])
    assert "INTERNAL" not in result.stderr, (target, value, result.stderr)
    if result.exit_code != 0:
        assert result.exit_code == 1, (target, value, result.output, result.exception)
        assert result.stderr.startswith("INVALID_ARGUMENT: "), (target, value, result.stderr)


def _cli_run(tmp_path: Path, examples: int) -> None:
    @_settings(examples)
    @given(target=st.sampled_from(sorted(YAML_TARGETS)), value=hostile)
    def run(target: str, value: Any) -> None:
        _over_cli(tmp_path, target, value)

    run()


def test_hostile_values_in_a_scenario_file_give_invalid_argument_or_a_tick(
    tmp_path: Path,
) -> None:
    """Issue: "a property test that feeds random quantities, durations and integers at every
    boundary (HTTP, CLI, YAML, Arrow) and asserts: a clear error or a valid tick, never an
    exception." `sluice solve`: exit 0, or exit 1 with `INVALID_ARGUMENT:`."""
    _cli_run(tmp_path, QUICK)


@pytest.mark.slow
def test_hostile_values_in_a_scenario_file_sweep(tmp_path: Path) -> None:
    """As the quick test above, with more examples."""
    _cli_run(tmp_path, SWEEP)


# --- Arrow snapshot tables ----------------------------------------------------------------------

TABLES = snapshot_tables(load_scenario(EXAMPLE))
ARROW_TARGETS: dict[str, tuple[str, str]] = {
    "pool node cpu": ("clusters", "node_cpu"),
    "pool node memory": ("clusters", "node_memory"),
    "pool accelerators": ("clusters", "node_accelerators"),
    "pool nodes": ("clusters", "nodes"),
    "pool max_nodes": ("clusters", "max_nodes"),
    "queue depth": ("queues", "depth"),
    "queue priority": ("queues", "priority"),
    "queue max_gpus": ("queues", "max_gpus"),
    "action max_queued_time": ("actions", "max_queued_time"),
    "action deadline_after": ("actions", "deadline_after"),
    "container gpu_count": ("containers", "gpu_count"),
    "environment replicas": ("environments", "replicas"),
}


def _column(original: pa.DataType, values: list[Any]) -> pa.Array:
    """`values` in the column's own type when they fit it, else in the type they have (a
    hand-made table may hold anything)."""
    for type_ in (original, pa.int64(), pa.float64(), pa.string()):
        try:
            return pa.array(values, type_)
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            continue
    return pa.array([None if v is None else repr(v) for v in values], pa.string())


def _over_arrow(tmp_path: Path, target: str, value: Any) -> None:
    name, column = ARROW_TARGETS[target]
    table = TABLES[name]
    if not table.num_rows:
        return
    values = table[column].to_pylist()
    values[0] = value
    index = table.schema.get_field_index(column)
    array = _column(table.schema.field(index).type, values)
    field = pa.field(column, array.type, nullable=True)
    tables = {**TABLES, name: table.set_column(index, field, array)}
    directory = tmp_path / f"snapshot-{next(ids)}"
    write_tables(tables, directory)
    try:
        snapshot = read_snapshot(directory)
    except InvalidInput as error:
        assert error.message, (target, value)
        return
    result = tick(snapshot, TickOptions(time_limit_s=0.5))
    assert result.solver is not None, (target, value)


def _arrow_run(tmp_path: Path, examples: int) -> None:
    @_settings(examples)
    @given(target=st.sampled_from(sorted(ARROW_TARGETS)), value=hostile)
    def run(target: str, value: Any) -> None:
        _over_arrow(tmp_path, target, value)

    run()


def test_hostile_values_in_arrow_tables_give_invalid_argument_or_a_snapshot(
    tmp_path: Path,
) -> None:
    """Issue: "a property test that feeds random quantities, durations and integers at every
    boundary (HTTP, CLI, YAML, Arrow) and asserts: a clear error or a valid tick, never an
    exception." A table with the value, read back: INVALID_ARGUMENT or a snapshot that
    ticks."""
    _arrow_run(tmp_path, QUICK)


@pytest.mark.slow
def test_hostile_values_in_arrow_tables_sweep(tmp_path: Path) -> None:
    """As the quick test above, with more examples."""
    _arrow_run(tmp_path, SWEEP)
