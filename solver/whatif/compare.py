"""What-if solves: change a copy of a snapshot, solve both with the same tick, compare.

Changes are written the way the CLI takes them:

    queue.research.max_accelerators.H100=64     a cap (a map entry; `=null` removes it)
    queue.inference-eval.scheduling=strict_fifo any queue field (`=null` unsets it)
    queue.batch-cpu.clusters=east,west          routing (`=null`: every cluster)
    cluster.east.h100.max_nodes=12              a node pool's nodes or max_nodes
    settings.default_gpu_type=T4                the organization's default GPU type
    drop cluster east                           lose a cluster
    drop node_pool east/h100                    lose one node pool

Losing capacity requeues what ran there: each action (and reusable pool) placed
on a lost cluster or pool becomes queued again at its arrival place, as the
platform would retry it; a queue's routes lose the cluster (a queue left with no
cluster then fails its actions as INFEASIBLE). The baseline is never changed:
every change returns a new Snapshot that shares the untouched parts.

From Python:

    from models.arrow.tables import read_snapshot
    from solver.whatif.compare import compare, with_queue
    base = read_snapshot("fixtures/realistic-snapshot")
    variant = with_queue(base, base.queue("research").model_copy(update={"max_gpus": 32}))
    print(compare(base, variant).summary())
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import ValidationError

from models.arrow.schema import ACTION_CHANGES, HEAD_CHANGES, USAGE_CHANGES
from models.arrow.tables import Format, read_snapshot, result_tables, write_tables
from models.devices import parse_device
from models.errors import InvalidInput
from models.quantity import CPU, MEMORY
from models.scenario import SCENARIO_SUFFIXES, load_scenario, validation_message
from models.snapshot import ActionState, NodePool, Queue, Settings, Snapshot
from solver import TickOptions, tick

NULL = {"null", "none", "~", ""}
QUEUE_MAPS = {"max_resources", "max_accelerators"}
POOL_FIELDS = {"nodes", "max_nodes"}
BYTES = {MEMORY, "ephemeral-storage"}


# --- changes --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScenarioEdit:
    """One change, as written (`queue.research.max_gpus=32`, `drop cluster east`)."""

    text: str

    def apply(self, snapshot: Snapshot) -> Snapshot:
        """A new snapshot with this change; `snapshot` is left as it was."""
        if self.text.startswith("drop "):
            return _drop(snapshot, self.text)
        path, sep, value = self.text.partition("=")
        if not sep:
            raise InvalidInput(f"{self.text!r}: expected PATH=VALUE or `drop KIND NAME`")
        parts = path.strip().split(".")
        setters: dict[str, Callable[[Snapshot, list[str], str], Snapshot]] = {
            "queue": _set_queue,
            "cluster": _set_pool,
            "settings": _set_settings,
        }
        setter = setters.get(parts[0])
        if setter is None or len(parts) < 2:
            raise InvalidInput(
                f"{self.text!r}: a change starts with queue., cluster. or settings.,"
                " or is `drop cluster NAME` / `drop node_pool CLUSTER/POOL`"
            )
        return setter(snapshot, parts[1:], value.strip())


def parse_changes(
    sets: Iterable[str] = (), drops: Iterable[tuple[str, str]] = ()
) -> list[ScenarioEdit]:
    """The CLI's --set PATH=VALUE and --drop KIND NAME options as changes, in that order."""
    return [ScenarioEdit(text) for text in sets] + [
        ScenarioEdit(f"drop {kind} {name}") for kind, name in drops
    ]


def apply_changes(snapshot: Snapshot, changes: Sequence[ScenarioEdit | str]) -> Snapshot:
    """`snapshot` with every change applied in order, checked like a loaded snapshot."""
    variant = snapshot
    for change in changes:
        change = change if isinstance(change, ScenarioEdit) else ScenarioEdit(change)
        try:
            variant = change.apply(variant)
        except InvalidInput as error:
            raise InvalidInput(f"{change.text}: {error.message}") from None
    try:
        # Models pass through as they are; this reruns only the snapshot-wide reference checks.
        return Snapshot.model_validate(
            {name: getattr(variant, name) for name in Snapshot.model_fields}
        )
    except ValidationError as error:
        raise InvalidInput(validation_message(error, "; ".join(_texts(changes)))) from None


def _texts(changes: Sequence[ScenarioEdit | str]) -> list[str]:
    return [c.text if isinstance(c, ScenarioEdit) else c for c in changes]


def _value(text: str) -> str | None:
    return None if text.lower() in NULL else text


def _validated(cls: type[Any], data: dict[str, Any], where: str) -> Any:
    try:
        return cls.model_validate(data)
    except ValidationError as error:
        raise InvalidInput(validation_message(error, where)) from None


def _set_queue(snapshot: Snapshot, parts: list[str], text: str) -> Snapshot:
    """queue.NAME.FIELD=VALUE or queue.NAME.MAP.KEY=VALUE (NAME may hold dots)."""
    fields = [i for i, part in enumerate(parts) if part in Queue.model_fields and i > 0]
    if not fields:
        raise InvalidInput(
            f"name a queue field after the queue: one of {', '.join(Queue.model_fields)}"
        )
    at = fields[0]
    name, field, key = ".".join(parts[:at]), parts[at], ".".join(parts[at + 1 :])
    queue = snapshot.queue(name)
    data = queue.model_dump()  # spellings, so validation parses them as a scenario would
    value = _value(text)
    if field in QUEUE_MAPS:
        if not key:
            raise InvalidInput(f"{field} is a map: write queue.{name}.{field}.KEY=VALUE")
        if field == "max_accelerators":
            key = parse_device(key, f"{field}.{key}").canonical
        else:
            key = key.strip().lower()
        if value is None:
            data[field].pop(key, None)
        else:
            data[field][key] = value
    elif key:
        raise InvalidInput(f"{field} is not a map; write queue.{name}.{field}=VALUE")
    elif field == "clusters":
        data[field] = None if value is None else [c.strip() for c in value.split(",") if c.strip()]
    elif field == "name":
        raise InvalidInput("a queue's name cannot change (its actions name it)")
    else:
        data[field] = value
    return with_queue(snapshot, _validated(Queue, data, f"queue {name}"))


def with_queue(snapshot: Snapshot, queue: Queue) -> Snapshot:
    """`snapshot` with `queue` in place of its queue of the same name."""
    snapshot.queue(queue.name)  # an unknown name is an error, not a new queue
    queues = [queue if q.name == queue.name else q for q in snapshot.queues]
    return snapshot.model_copy(update={"queues": queues})


def _set_pool(snapshot: Snapshot, parts: list[str], text: str) -> Snapshot:
    """cluster.CLUSTER.POOL.FIELD=VALUE for a node pool's nodes or max_nodes."""
    if len(parts) < 3 or parts[-1] not in POOL_FIELDS:
        raise InvalidInput(
            f"write cluster.CLUSTER.POOL.FIELD=VALUE with FIELD one of {POOL_FIELDS}"
        )
    cluster_name, pool_name, field = parts[0], ".".join(parts[1:-1]), parts[-1]
    cluster = _cluster(snapshot, cluster_name)
    pool = next((p for p in cluster.node_pools if p.name == pool_name), None)
    if pool is None:
        raise InvalidInput(f"cluster {cluster_name} has no node pool {pool_name!r}")
    data = {**pool.model_dump(), field: _value(text)}
    changed: NodePool = _validated(NodePool, data, f"node pool {cluster_name}/{pool_name}")
    pools = [changed if p.name == pool_name else p for p in cluster.node_pools]
    clusters = [
        c.model_copy(update={"node_pools": pools}) if c.name == cluster_name else c
        for c in snapshot.clusters
    ]
    return snapshot.model_copy(update={"clusters": clusters})


def _set_settings(snapshot: Snapshot, parts: list[str], text: str) -> Snapshot:
    data = {**snapshot.settings.model_dump(), ".".join(parts): _value(text)}
    settings = _validated(Settings, data, "settings")
    return snapshot.model_copy(update={"settings": settings})


def _cluster(snapshot: Snapshot, name: str) -> Any:
    for cluster in snapshot.clusters:
        if cluster.name == name:
            return cluster
    known = ", ".join(c.name for c in snapshot.clusters) or "none"
    raise InvalidInput(f"no cluster {name!r} (clusters: {known})")


def _drop(snapshot: Snapshot, text: str) -> Snapshot:
    words = text.split()
    if len(words) != 3 or words[1] not in ("cluster", "node_pool"):
        raise InvalidInput("write `drop cluster NAME` or `drop node_pool CLUSTER/POOL`")
    kind, name = words[1], words[2]
    if kind == "cluster":
        _cluster(snapshot, name)
        clusters = [c for c in snapshot.clusters if c.name != name]
        queues = [
            q.model_copy(update={"clusters": [c for c in q.clusters if c != name]})
            if q.clusters and name in q.clusters
            else q
            for q in snapshot.queues
        ]
        changed = snapshot.model_copy(update={"clusters": clusters, "queues": queues})
        return _requeue(changed, lambda cluster, _pool: cluster == name)
    cluster_name, slash, pool_name = name.partition("/")
    cluster = _cluster(snapshot, cluster_name)
    if not slash or pool_name not in {p.name for p in cluster.node_pools}:
        raise InvalidInput(f"cluster {cluster_name} has no node pool {pool_name!r}")
    pools = [p for p in cluster.node_pools if p.name != pool_name]
    clusters = [
        c.model_copy(update={"node_pools": pools}) if c.name == cluster_name else c
        for c in snapshot.clusters
    ]
    changed = snapshot.model_copy(update={"clusters": clusters})
    return _requeue(changed, lambda cluster, pool: (cluster, pool) == (cluster_name, pool_name))


def _requeue(snapshot: Snapshot, lost: Callable[[str, str], bool]) -> Snapshot:
    """Running work with a container on lost capacity is queued again; so is work in a lost pool."""

    def hit(placement: Any) -> bool:
        return placement is not None and any(
            lost(placement.cluster, spot.node_pool) for spot in placement.containers
        )

    stopped = {e.name for e in snapshot.environments if hit(e.placement)}
    environments = [
        e.model_copy(update={"running": False, "placement": None}) if e.name in stopped else e
        for e in snapshot.environments
    ]
    actions = [
        a.model_copy(update={"state": ActionState.QUEUED, "placement": None})
        if hit(a.placement) or (a.state is ActionState.RUNNING and a.environment in stopped)
        else a
        for a in snapshot.actions
    ]
    return snapshot.model_copy(update={"actions": actions, "environments": environments})


# --- solving and comparing ------------------------------------------------------------------------


def load_snapshot(path: str | Path) -> Snapshot:
    """A scenario file (.yaml, .yml, .json) or an Arrow snapshot (a directory or a stream
    file)."""
    path = Path(path)
    if path.suffix.lower() in SCENARIO_SUFFIXES:
        return load_scenario(path)
    return read_snapshot(path)


def solve(snapshot: Snapshot, options: TickOptions | None = None) -> dict[str, pa.Table]:
    """One tick of `snapshot` as result tables (models.arrow.schema.RESULT_TABLES)."""
    return result_tables(tick(snapshot, options))


def outcomes(snapshot: Snapshot, results: Mapping[str, pa.Table]) -> pa.Table:
    """Every action's state after the tick: running, scheduled, waiting or failed.

    Columns action, queue, status, detail (the cluster, wait reason or failure code) and
    position (arrival order in the snapshot).
    """
    running = [a for a in snapshot.actions if a.state is ActionState.RUNNING]
    scheduled = (
        results["scheduled"]
        .group_by("action", use_threads=False)
        .aggregate([("queue", "first"), ("cluster", "first")])
    )
    parts = [
        _outcome(
            [a.id for a in running],
            [a.queue for a in running],
            "running",
            [a.placement.cluster if a.placement else None for a in running],
        ),
        _outcome(
            scheduled["action"], scheduled["queue_first"], "scheduled", scheduled["cluster_first"]
        ),
        _outcome(
            results["waiting"]["action"],
            results["waiting"]["queue"],
            "waiting",
            results["waiting"]["reason"],
        ),
        _outcome(
            results["failed"]["action"],
            results["failed"]["queue"],
            "failed",
            results["failed"]["code"],
        ),
    ]
    table = pa.concat_tables(parts)
    ids = pa.array([a.id for a in snapshot.actions], pa.string())
    return table.append_column("position", pc.index_in(table["action"], value_set=ids))


def _outcome(actions: Any, queues: Any, status: str, details: Any) -> pa.Table:
    columns = [_strings(actions), _strings(queues), None, _strings(details)]
    columns[2] = pa.array([status] * len(columns[0]), pa.string())
    return pa.Table.from_arrays(columns, names=["action", "queue", "status", "detail"])


def _strings(values: list[str | None] | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks().cast(pa.string())
    return pa.array(values, pa.string())


def _suffixed(table: pa.Table, keys: Sequence[str], suffix: str) -> pa.Table:
    return table.rename_columns([c if c in keys else f"{c}_{suffix}" for c in table.column_names])


def _joined(before: pa.Table, after: pa.Table, keys: list[str]) -> pa.Table:
    """Full outer join of two tables on `keys`, their other columns suffixed _before/_after."""
    return _suffixed(before, keys, "before").join(
        _suffixed(after, keys, "after"), keys=keys, join_type="full outer", use_threads=False
    )


def _differ(a: pa.ChunkedArray, b: pa.ChunkedArray) -> pa.ChunkedArray:
    """Null-aware inequality: null vs a value differs, null vs null does not."""
    return pc.invert(pc.fill_null(pc.equal(a, b), pc.and_(a.is_null(), b.is_null())))


def action_changes(before: pa.Table, after: pa.Table) -> pa.Table:
    """Actions whose status differs (ACTION_CHANGES), in arrival order."""
    joined = _joined(before, after, ["action"])
    changed = joined.filter(_differ(joined["status_before"], joined["status_after"]))
    order = pc.coalesce(changed["position_after"], changed["position_before"])
    changed = changed.take(pc.sort_indices(order))
    return pa.Table.from_arrays(
        [
            changed["action"],
            pc.coalesce(changed["queue_after"], changed["queue_before"]),
            pc.fill_null(changed["status_before"], "absent"),
            pc.fill_null(changed["status_after"], "absent"),
            changed["detail_before"],
            changed["detail_after"],
        ],
        schema=ACTION_CHANGES,
    )


def usage_changes(before: pa.Table, after: pa.Table) -> pa.Table:
    """Every usage row of either side, before next to after (USAGE_CHANGES)."""
    keys = ["queue", "kind", "resource"]
    joined = _joined(before, after, keys).sort_by([(k, "ascending") for k in keys])
    changed = pc.or_(
        _differ(joined["used_before"], joined["used_after"]),
        _differ(joined["cap_before"], joined["cap_after"]),
    )
    return pa.Table.from_arrays(
        [joined[k] for k in keys]
        + [joined[c] for c in ("used_before", "used_after", "cap_before", "cap_after")]
        + [changed],
        schema=USAGE_CHANGES,
    )


def head_changes(before: pa.Table, after: pa.Table) -> pa.Table:
    """Every queue's head before next to after, and whether it became blocked (HEAD_CHANGES)."""
    columns = ["queue", "head_blocked", "head_action"]
    joined = _joined(before.select(columns), after.select(columns), ["queue"]).sort_by("queue")
    was = pc.fill_null(joined["head_blocked_before"], False)
    now = pc.fill_null(joined["head_blocked_after"], False)
    change = pc.if_else(
        pc.and_(now, pc.invert(was)),
        "blocked",
        pc.if_else(pc.and_(was, pc.invert(now)), "unblocked", "unchanged"),
    )
    return pa.Table.from_arrays(
        [
            joined["queue"],
            joined["head_blocked_before"],
            joined["head_blocked_after"],
            joined["head_action_before"],
            joined["head_action_after"],
            change,
        ],
        schema=HEAD_CHANGES,
    )


@dataclass
class Solved:
    """One snapshot's result tables and every action's outcome (see `outcomes`)."""

    results: dict[str, pa.Table]
    outcomes: pa.Table

    @classmethod
    def of(cls, snapshot: Snapshot, options: TickOptions) -> Solved:
        results = solve(snapshot, options)
        return cls(results, outcomes(snapshot, results))


@dataclass
class Comparison:
    """A baseline and a variant solved by the same tick, and what differs between them."""

    changes: list[str]
    baseline: dict[str, pa.Table]  # result tables
    variant: dict[str, pa.Table]
    actions: pa.Table  # ACTION_CHANGES
    usage: pa.Table  # USAGE_CHANGES
    heads: pa.Table  # HEAD_CHANGES

    @classmethod
    def of(cls, changes: Sequence[str], baseline: Solved, variant: Solved) -> Comparison:
        before, after = baseline.results, variant.results
        return cls(
            changes=list(changes),
            baseline=before,
            variant=after,
            actions=action_changes(baseline.outcomes, variant.outcomes),
            usage=usage_changes(before["usage"], after["usage"]),
            heads=head_changes(before["queue_heads"], after["queue_heads"]),
        )

    def tables(self) -> dict[str, pa.Table]:
        return {
            "action_changes": self.actions,
            "usage_changes": self.usage,
            "head_changes": self.heads,
        }

    def counts(self) -> dict[str, int]:
        """newly_scheduled, newly_waiting, newly_failed, heads_blocked, heads_unblocked."""
        after = self.actions["after"]
        change = self.heads["change"]
        return {
            "newly_scheduled": pc.sum(pc.equal(after, "scheduled")).as_py() or 0,
            "newly_waiting": pc.sum(pc.equal(after, "waiting")).as_py() or 0,
            "newly_failed": pc.sum(pc.equal(after, "failed")).as_py() or 0,
            "heads_blocked": pc.sum(pc.equal(change, "blocked")).as_py() or 0,
            "heads_unblocked": pc.sum(pc.equal(change, "unblocked")).as_py() or 0,
        }

    def write(self, directory: Path, fmt: Format = "arrow") -> None:
        """baseline/ and variant/ result tables, the three change tables and summary.txt."""
        write_tables(self.baseline, directory / "baseline", fmt)
        write_tables(self.variant, directory / "variant", fmt)
        write_tables(self.tables(), directory, fmt)
        (directory / "summary.txt").write_text(self.summary() + "\n")

    def summary(self, listed: int = 10) -> str:
        """A readable account: totals, actions that changed, caps whose usage moved, heads."""
        lines = [f"changes: {'; '.join(self.changes) or '(none)'}"]
        for label, results in (("baseline", self.baseline), ("variant", self.variant)):
            lines.append(f"{label + ':':<9} {totals(results)}")
        counts = self.counts()
        lines.append(
            f"actions: {counts['newly_scheduled']} newly scheduled,"
            f" {counts['newly_waiting']} newly waiting, {counts['newly_failed']} newly failed"
        )
        lines += _action_lines(self.actions, listed)
        lines += _usage_lines(self.usage)
        lines += _head_lines(self.heads)
        return "\n".join(lines)


def totals(results: Mapping[str, pa.Table]) -> str:
    solver = results["solver"].to_pylist()[0]
    scheduled = pc.count_distinct(results["scheduled"]["action"]).as_py()
    return (
        f"{scheduled} scheduled, {results['waiting'].num_rows} waiting,"
        f" {results['failed'].num_rows} failed ({solver['status']},"
        f" {solver['wall_time_s']:.2f} s{', time limit hit' if solver['limit_hit'] else ''})"
    )


def _action_lines(changes: pa.Table, listed: int) -> list[str]:
    lines = []
    for status in ("scheduled", "waiting", "failed"):
        rows = changes.filter(pc.equal(changes["after"], status))
        if not rows.num_rows:
            continue
        per_queue = rows.group_by("queue", use_threads=False).aggregate([("action", "count")])
        counts = ", ".join(
            f"{q} {n}"
            for q, n in sorted(
                zip(
                    per_queue["queue"].to_pylist(),
                    per_queue["action_count"].to_pylist(),
                    strict=True,
                )
            )
        )
        lines.append(f"  newly {status}: {counts}")
        for row in rows.slice(0, listed).to_pylist():
            was = row["before"] + (f" ({row['before_detail']})" if row["before_detail"] else "")
            now = row["after"] + (f" ({row['after_detail']})" if row["after_detail"] else "")
            lines.append(f"    {row['action']} [{row['queue']}]: {was} -> {now}")
        if rows.num_rows > listed:
            lines.append(f"    ... and {rows.num_rows - listed} more (action_changes.arrow)")
    return lines


def _readable(kind: str, resource: str, amount: int | None) -> str:
    """Approximate, for reading side by side (the tables hold exact solver units)."""
    if amount is None:
        return "-"
    if kind != "resource":
        return str(amount)
    if resource == CPU:
        return f"{amount / 1000:g} cores"
    if resource in BYTES:
        return f"{amount / 2**30:.1f}Gi"
    return str(amount)


def _before_after(kind: str, resource: str, before: int | None, after: int | None) -> str:
    if before == after:
        return _readable(kind, resource, before)
    return f"{_readable(kind, resource, before)} -> {_readable(kind, resource, after)}"


def _usage_lines(usage: pa.Table) -> list[str]:
    rows = usage.filter(usage["changed"]).to_pylist()
    if not rows:
        return ["usage per cap: unchanged"]
    lines = ["usage per cap (rows that changed):"]
    for row in rows:
        kind, resource = row["kind"], row["resource"]
        used = _before_after(kind, resource, row["used_before"], row["used_after"])
        cap = _before_after(kind, resource, row["cap_before"], row["cap_after"])
        lines.append(f"  {row['queue']:<16} {resource:<30} used {used:<28} cap {cap}")
    return lines


def _head_lines(heads: pa.Table) -> list[str]:
    rows = heads.filter(pc.not_equal(heads["change"], "unchanged")).to_pylist()
    if not rows:
        return ["queue heads: no queue's head became blocked or unblocked"]
    lines = ["queue heads:"]
    for row in rows:
        head = row["head_after"] if row["change"] == "blocked" else row["head_before"]
        lines.append(f"  {row['queue']}: head {row['change']} ({head})")
    return lines


def compare(
    baseline: Snapshot,
    variant: Snapshot,
    options: TickOptions | None = None,
    changes: Sequence[str] = (),
) -> Comparison:
    """Solve both snapshots with the same options and compare the results."""
    options = options or TickOptions()
    return Comparison.of(changes, Solved.of(baseline, options), Solved.of(variant, options))
