"""Quota-managed job queues in Arrow snapshots (schema version 2) and in the result tables.

Issue "Quota shares": "Scenario files, snapshots, the service API, the client and the CLI
all carry job queues with shares, next to the capped queues, with the same conventions."
"""

from __future__ import annotations

import io
import random
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from fixtures import FIXTURES
from models.arrow import schema as arrow_schema
from models.arrow.tables import (
    read_snapshot,
    read_snapshot_stream,
    result_tables,
    snapshot_from_tables,
    snapshot_tables,
    write_snapshot,
    write_snapshot_stream,
)
from models.errors import InvalidInput
from models.quota import (
    Job,
    JobQueue,
    JobState,
    QueueState,
    QuotaShare,
    QuotaSharePolicy,
    SchedulingPolicy,
    ServiceEnvironment,
    ShareStrategy,
)
from models.scenario import dump_scenario, load_scenario
from models.snapshot import Snapshot
from solver import TickOptions, tick
from tests.support.quota_builders import G5, NOW, P3, SEED_FIXTURE

EXAMPLE = FIXTURES / "issue-example.yaml"
Tables = dict[str, pa.Table]
TYPES = [G5, P3, "ml.g5.2xlarge", "ml.p4d.24xlarge", "ml.trn1.32xlarge", "ml.m5.large"]


# --- round trips --------------------------------------------------------------------------------


def test_the_seed_fixture_round_trips_losslessly(tmp_path: Path) -> None:
    """The seed's example (three shares, each max 1 ml.g5.xlarge, environment max 3,
    LEND_AND_BORROW, LEND and RESERVE) goes scenario -> Arrow -> scenario unchanged."""
    scenario = load_scenario(SEED_FIXTURE)
    assert [s.strategy for s in scenario.job_queues[0].quota_shares] == list(ShareStrategy)[::-1]
    write_snapshot(scenario, tmp_path / "ipc")
    write_snapshot(scenario, tmp_path / "parquet", "parquet")
    stream = io.BytesIO()
    write_snapshot_stream(scenario, stream)
    for back in (
        read_snapshot(tmp_path / "ipc"),
        read_snapshot(tmp_path / "parquet"),
        read_snapshot_stream(stream.getvalue()),
    ):
        assert back == scenario
        again = tmp_path / "again.yaml"
        again.write_text(dump_scenario(back))
        assert load_scenario(again) == scenario


def _random_snapshot(rng: random.Random) -> Snapshot:
    policies = [
        SchedulingPolicy(name="quota", quota_share_policy=QuotaSharePolicy()),
        SchedulingPolicy(name="plain"),  # not quota-compatible: its queue reads as INVALID
    ]
    environments, queues, jobs = [], [], []
    for q in range(rng.randint(1, 3)):
        types = rng.sample(TYPES, rng.randint(1, 5))
        environments.append(
            ServiceEnvironment(
                name=f"env-{q}", capacity_limits={t: rng.randint(0, 9) for t in types}
            )
        )
        shares = []
        for s in range(rng.randint(1, 6)):
            strategy = rng.choice(list(ShareStrategy))
            shares.append(
                QuotaShare(
                    name=f"share-{s}",
                    capacity_limits={
                        t: rng.randint(0, 4) for t in rng.sample(types, rng.randint(1, len(types)))
                    },
                    strategy=strategy,
                    borrow_limit=rng.choice([None, -1, 0, 50, 250]) if strategy.borrows else None,
                    in_share_preemption=rng.random() < 0.5,
                )
            )
        queue = JobQueue(
            name=f"queue-{q}",
            state=rng.choice(list(QueueState)),
            scheduling_policy=rng.choice(["quota", "quota", "plain"]),
            service_environment=f"env-{q}",
            quota_shares=shares,
        )
        queues.append(queue)
        for j in range(rng.randint(0, 12)):
            share = rng.choice(shares)
            state = rng.choice(list(JobState))
            submitted = NOW - timedelta(minutes=rng.randint(1, 600), microseconds=rng.randint(0, 9))
            jobs.append(
                Job(
                    id=f"{queue.name}-job-{j}",
                    job_queue=queue.name,
                    share=share.name,
                    priority=rng.randint(0, 9999),
                    instance_type=rng.choice(list(share.capacity_limits)),
                    count=rng.randint(1, 3),
                    state=state,
                    submitted_at=submitted,
                    started_at=submitted + timedelta(seconds=30) if state.holds_capacity else None,
                )
            )
    rng.shuffle(jobs)  # arrival order is row order, not grouped by queue
    return Snapshot(
        now=NOW,
        scheduling_policies=policies,
        service_environments=environments,
        job_queues=queues,
        jobs=jobs,
    )


@pytest.mark.parametrize("seed", range(12))
def test_random_job_queues_round_trip_through_ipc_and_parquet(seed: int, tmp_path: Path) -> None:
    snapshot = _random_snapshot(random.Random(seed))
    write_snapshot(snapshot, tmp_path / "ipc")
    write_snapshot(snapshot, tmp_path / "parquet", "parquet")
    assert read_snapshot(tmp_path / "ipc") == snapshot
    assert read_snapshot(tmp_path / "parquet") == snapshot


def test_jobs_built_column_wise_equal_validated_ones() -> None:
    """Jobs skip per-row validation on read; the models are the ones pydantic would build."""
    snapshot = snapshot_from_tables(snapshot_tables(_random_snapshot(random.Random(3))))
    validated = Snapshot.model_validate(snapshot.model_dump())
    assert validated == snapshot
    assert snapshot.jobs
    for built, checked in zip(snapshot.jobs, validated.jobs, strict=True):
        assert built.__getstate__()["__dict__"] == checked.__getstate__()["__dict__"]


# --- versions -----------------------------------------------------------------------------------


def _versioned(tables: Tables, version: bytes, names: list[str] | None = None) -> Tables:
    changed = {}
    for name in names or list(tables):
        metadata = dict(tables[name].schema.metadata)
        metadata[arrow_schema.SNAPSHOT_VERSION_KEY] = version
        changed[name] = tables[name].replace_schema_metadata(metadata)
    return {**tables, **changed}


def test_a_version_1_snapshot_still_reads_and_has_no_job_queues() -> None:
    """Version 1 has no quota tables; ones lying beside it are not read."""
    capped = load_scenario(EXAMPLE)
    tables = _versioned(snapshot_tables(capped), b"1")
    version_1 = {n: t for n, t in tables.items() if n not in arrow_schema.QUOTA_SNAPSHOT_TABLES}
    assert snapshot_from_tables(version_1) == capped
    assert snapshot_from_tables(tables) == capped
    assert read_snapshot(FIXTURES / "realistic-snapshot").job_queues == []


def test_version_2_needs_every_quota_table_and_one_version() -> None:
    tables = snapshot_tables(load_scenario(SEED_FIXTURE))
    without = {n: t for n, t in tables.items() if n != "quota_shares"}
    with pytest.raises(InvalidInput, match=r"^snapshot: table quota_shares: is missing$"):
        snapshot_from_tables(without)
    mixed = _versioned(tables, b"1", ["jobs"])
    with pytest.raises(InvalidInput) as error:
        snapshot_from_tables(mixed)
    assert error.value.message == (
        "snapshot: table jobs: has schema version 1, but table settings has 3;"
        " a snapshot's tables share one version"
    )


# --- bad input ----------------------------------------------------------------------------------


def _column(tables: Tables, table: str, column: str, values: list[object]) -> Tables:
    index = tables[table].schema.get_field_index(column)
    array = pa.array(values, tables[table].schema.field(column).type)
    return {**tables, table: tables[table].set_column(index, column, array)}


def _row(tables: Tables, table: str, row: int, **changes: object) -> Tables:
    """Copy row `row` of `table` to the end, with `changes`."""
    data = tables[table].to_pylist()
    data.append({**data[row], **changes})
    return {**tables, table: pa.Table.from_pylist(data, schema=tables[table].schema)}


def _limits(n: int) -> list[tuple[str, int]]:
    return [(t, 1) for t in TYPES[:n]]


def _shares(count: int) -> Callable[[Tables], Tables]:
    def mutate(t: Tables) -> Tables:
        for i in range(count - 3):
            t = _row(t, "quota_shares", 1, name=f"extra-{i}")
        return t

    return mutate


BAD: list[tuple[str, Callable[[Tables], Tables], str]] = [
    (
        "21 shares",
        _shares(21),
        "table quota_shares, row 20, column job_queue: job queue training has more than 20"
        " quota shares",
    ),
    (
        "a queue without shares",
        lambda t: _row(t, "job_queues", 0, name="empty"),
        "table job_queues, row 1, column name: has no rows in table quota_shares; a job queue"
        " holds 1 to 20 quota shares",
    ),
    (
        "no capacity limits",
        lambda t: _column(t, "quota_shares", "capacity_limits", [[], _limits(1), _limits(1)]),
        "table quota_shares, row 0, column capacity_limits: a quota share has 1 to 5 capacity"
        " limits, not 0",
    ),
    (
        "six capacity limits",
        lambda t: _column(
            t, "quota_shares", "capacity_limits", [_limits(1), _limits(6), _limits(1)]
        ),
        "table quota_shares, row 1, column capacity_limits: a quota share has 1 to 5 capacity"
        " limits, not 6",
    ),
    (
        "NUM_INSTANCES",
        lambda t: _column(t, "service_environments", "capacity_limits", [[("NUM_INSTANCES", 3)]]),
        "table service_environments, row 0, column capacity_limits: NUM_INSTANCES: a capacity"
        " limit by NUM_INSTANCES is not accepted; quota management limits capacity per instance"
        " type (for example ml.g5.xlarge: 3)",
    ),
    (
        "an instance type SageMaker does not have",
        lambda t: _column(
            t, "quota_shares", "capacity_limits", [_limits(1), _limits(1), [("ml.g5.huge", 1)]]
        ),
        "table quota_shares, row 2, column capacity_limits: ml.g5.huge: 'ml.g5.huge' is not an"
        " instance type SageMaker Training supports",
    ),
    (
        "an instance type limited twice",
        lambda t: _column(t, "service_environments", "capacity_limits", [[(G5, 3), (G5, 2)]]),
        "table service_environments, row 0, column capacity_limits: ml.g5.xlarge is limited twice",
    ),
    (
        "a negative limit",
        lambda t: _column(t, "service_environments", "capacity_limits", [[(G5, -1)]]),
        "table service_environments, row 0, column capacity_limits: ml.g5.xlarge=-1 is negative",
    ),
    (
        "a borrow limit on a LEND share",
        lambda t: _column(t, "quota_shares", "borrow_limit", [None, 100, None]),
        "table quota_shares, row 1, column borrow_limit: quota share project-b has strategy LEND,"
        " which does not borrow; only LEND_AND_BORROW shares take a borrow limit",
    ),
    (
        "a borrow limit below -1",
        lambda t: _column(t, "quota_shares", "borrow_limit", [-2, None, None]),
        "table quota_shares, row 0, column borrow_limit: Input should be greater than or equal"
        " to -1",
    ),
    (
        "an unknown strategy",
        lambda t: _column(t, "quota_shares", "strategy", ["LEND_AND_BORROW", "SHARE", "RESERVE"]),
        "table quota_shares, row 1, column strategy: Input should be 'RESERVE', 'LEND' or"
        " 'LEND_AND_BORROW'",
    ),
    (
        "a share of an unknown job queue",
        lambda t: _row(t, "quota_shares", 0, job_queue="nope"),
        "table quota_shares, row 3, column job_queue: unknown job queue 'nope'",
    ),
    (
        "a share name twice in one queue",
        lambda t: _row(t, "quota_shares", 0),
        "table quota_shares, row 3, column name: quota share 'project-a' appears twice",
    ),
    (
        "an unknown scheduling policy",
        lambda t: _column(t, "job_queues", "scheduling_policy", ["nope"]),
        "table job_queues, row 0, column scheduling_policy: unknown scheduling policy 'nope'",
    ),
    (
        "an unknown quota share policy",
        lambda t: _column(t, "scheduling_policies", "quota_share_policy", ["LIFO"]),
        "table scheduling_policies, row 0, column quota_share_policy: Input should be 'FIFO'",
    ),
    (
        "a job queue state",
        lambda t: _column(t, "job_queues", "state", ["PAUSED"]),
        "table job_queues, row 0, column state: Input should be 'ENABLED' or 'DISABLED'",
    ),
    (
        "a job of an unknown share",
        lambda t: _column(t, "jobs", "share", ["project-a", "project-a", "project-z", "project-b"]),
        "table jobs, row 2, column share: job queue training has no quota share 'project-z'",
    ),
    (
        "a job of an unknown job queue",
        lambda t: _row(t, "jobs", 0, id="x", job_queue="nope"),
        "table jobs, row 4, column job_queue: unknown job queue 'nope'",
    ),
    (
        "a job id twice",
        lambda t: _row(t, "jobs", 1),
        "table jobs, row 4, column id: job 'a-2' appears twice",
    ),
    (
        "a priority above 9999",
        lambda t: _row(t, "jobs", 3, id="x", priority=10_000),
        "table jobs, row 4, column priority: 10000 is outside 0..9999",
    ),
    (
        "no instances",
        lambda t: _row(t, "jobs", 3, id="x", count=0),
        "table jobs, row 4, column count: must be at least 1 instance",
    ),
    (
        "an instance type of a job",
        lambda t: _row(t, "jobs", 3, id="x", instance_type="NUM_INSTANCES"),
        "table jobs, row 4, column instance_type: a capacity limit by NUM_INSTANCES is not"
        " accepted; quota management limits capacity per instance type (for example"
        " ml.g5.xlarge: 3)",
    ),
    (
        "a running job without started_at",
        lambda t: _row(t, "jobs", 3, id="x", state="RUNNING"),
        "table jobs, row 4, column started_at: is null for a RUNNING job",
    ),
    (
        "a queued job with started_at",
        lambda t: _row(t, "jobs", 0, id="x", state="QUEUED"),
        "table jobs, row 4, column started_at: is set for a QUEUED job",
    ),
    (
        "a job state",
        lambda t: _row(t, "jobs", 3, id="x", state="queued"),
        "table jobs, row 4, column state: 'queued' is not one of QUEUED, SCHEDULED, STARTING,"
        " RUNNING",
    ),
]


@pytest.mark.parametrize(("case", "mutate", "message"), BAD, ids=[case for case, *_ in BAD])
def test_bad_quota_tables_name_table_row_and_column(
    case: str, mutate: Callable[[Tables], Tables], message: str
) -> None:
    """ "Every limit in the seed is validated with a clear error (21 shares, 0 or 6 limits, an
    unsupported instance type, a borrow limit on a non-borrowing share)" -- in Arrow too."""
    tables = mutate(snapshot_tables(load_scenario(SEED_FIXTURE)))
    with pytest.raises(InvalidInput) as error:
        snapshot_from_tables(tables)
    assert error.value.message.startswith(f"snapshot: {message}"), error.value.message


# --- result tables ------------------------------------------------------------------------------


def test_the_seed_tick_as_result_tables() -> None:
    """ "what is preempted when a lender's jobs arrive": b-1 takes back project-b's instance
    from a-2, which goes back in line; the tables say so."""
    tables = result_tables(tick(load_scenario(SEED_FIXTURE), TickOptions(time_limit_s=5.0)))
    for name, schema in arrow_schema.RESULT_TABLES.items():
        assert tables[name].schema == schema
    assert tables["quota_scheduled"].column("job").to_pylist() == ["b-1"]
    (preempted,) = tables["quota_preempted"].to_pylist()
    assert (preempted["job"], preempted["reason"], preempted["beneficiary"]) == (
        "a-2",
        "reclaim",
        "b-1",
    )
    assert preempted["position"] == 0  # back at its arrival place, ahead of a-3
    assert tables["quota_waiting"].select(["job", "reason", "position"]).to_pylist() == [
        {"job": "a-3", "reason": "no_idle_capacity", "position": 1}
    ]
    usage = {row["share"]: row for row in tables["quota_usage"].to_pylist()}
    assert {share: row["used"] for share, row in usage.items()} == {
        "project-a": 1,
        "project-b": 1,
        "project-c": 0,
    }
    assert usage["project-a"]["queued"] == 2
    (queue,) = tables["quota_job_queues"].to_pylist()
    assert (queue["status"], queue["reason"], queue["max_capacity"], queue["used"]) == (
        "VALID",
        "JobQueue Healthy",
        3,
        2,
    )


def test_a_snapshot_without_job_queues_has_empty_quota_result_tables() -> None:
    tables = result_tables(tick(load_scenario(EXAMPLE), TickOptions(time_limit_s=5.0)))
    for name in arrow_schema.RESULT_TABLES:
        if name.startswith("quota_"):
            assert tables[name].num_rows == 0
