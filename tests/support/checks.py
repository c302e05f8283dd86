"""Properties every tick result must have, checked without the engine's own code.

`problems(snapshot, result)` lists every broken invariant in words (empty when the
result is sound). The bookkeeping (requests, charges, what running work holds)
is the oracle's, so these checks and the oracle read the spec the same way.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from models.result import PlacedContainer, TickResult, WaitReason
from models.snapshot import ActionState, Container, Scheduling, Snapshot
from tests.support.oracle import Oracle, global_order


def decisions(result: TickResult) -> dict[str, Any]:
    """Everything a tick decided and reported, without the timings that vary run to run."""
    return result.model_dump(mode="json", exclude={"solver"})


def problems(snapshot: Snapshot, result: TickResult) -> list[str]:
    return _Checker(snapshot, result).run()


class _Checker:
    def __init__(self, snapshot: Snapshot, result: TickResult) -> None:
        self.snap = snapshot
        self.result = result
        self.oracle = Oracle(snapshot)  # its bookkeeping only
        self.found: list[str] = []
        self.actions = {a.id: a for a in snapshot.actions}
        self.scheduled = {s.action: s for s in result.scheduled}

    def run(self) -> list[str]:
        self._each_pending_once()
        self._placements()
        self._caps_and_limits()
        self._strict_prefix()
        return self.found

    def _each_pending_once(self) -> None:
        """Every pending action appears exactly once in scheduled, failed or waiting."""
        seen = Counter(
            [s.action for s in self.result.scheduled]
            + [f.action for f in self.result.failed]
            + [w.action for w in self.result.waiting]
        )
        pending = {a.id for a in self.snap.actions if a.state is ActionState.QUEUED}
        for action, times in seen.items():
            if action not in pending:
                self.found.append(f"{action} is reported but is not a pending action")
            elif times > 1:
                self.found.append(f"{action} is reported {times} times")
        for action in sorted(pending - set(seen)):
            self.found.append(f"pending action {action} is missing from the result")

    def _placements(self) -> None:
        """Each container on a routed cluster, a matching pool, a node within full scale, and
        no node holds more than its room."""
        node_sum: dict[tuple[str, str, int], Counter[str]] = defaultdict(Counter)
        for key, used in self.oracle.node_used.items():
            node_sum[key].update(used)
        started = {e.environment: e for e in self.result.environments_started}
        for start in self.result.environments_started:
            env = self.oracle.envs.get(start.environment)
            if env is None or env.running:
                self.found.append(f"environment {start.environment} started but was not stopped")
                continue
            starters = [s for s in self.result.scheduled if s.environment == start.environment]
            if not starters:
                self.found.append(f"environment {start.environment} started with no action")
            self._place(
                f"environment {env.name}", env.queue, start.cluster, env.replica_containers(),
                start.containers, node_sum,
            )  # fmt: skip
        for s in self.result.scheduled:
            action = self.actions[s.action]
            if s.queue != action.queue:
                self.found.append(f"{s.action} reported in queue {s.queue}, not {action.queue}")
            if action.environment is not None:
                env = self.oracle.envs[action.environment]
                if not env.running and action.environment not in started:
                    self.found.append(f"{s.action} joins {env.name}, which neither runs nor starts")
                if s.containers:
                    self.found.append(f"{s.action} joins a pool but got containers placed")
                continue
            self._place(
                s.action, action.queue, s.cluster, action.containers, s.containers, node_sum
            )
        for (cluster, pool_name, index), used in node_sum.items():
            pool = self.oracle.pool_by_key[(cluster, pool_name)]
            for key, amount in used.items():
                if amount > pool.room.get(key, 0):
                    self.found.append(
                        f"node {cluster}/{pool_name}/{index}: {key} {amount} > room"
                        f" {pool.room.get(key, 0)}"
                    )

    def _place(
        self,
        who: str,
        queue: str,
        cluster: str | None,
        containers: list[Container],
        placed: list[PlacedContainer],
        node_sum: dict[tuple[str, str, int], Counter[str]],
    ) -> None:
        if cluster not in self.oracle.routed(queue):
            self.found.append(f"{who} placed on {cluster}, not a cluster queue {queue} routes to")
            return
        spots = {p.name: p for p in placed}
        if sorted(spots) != sorted(c.name for c in containers) or len(placed) != len(spots):
            self.found.append(f"{who}: placed containers {sorted(spots)} do not match its own")
            return
        for container in containers:
            spot = spots[container.name]
            pool = self.oracle.pool_by_key.get((cluster, spot.node_pool))
            if pool is None:
                self.found.append(f"{who}: unknown pool {spot.node_pool} in {cluster}")
                continue
            need = self.oracle.need(container)
            if not pool.offers(need):
                self.found.append(f"{who}/{container.name}: pool {pool.name} does not match it")
            if not 0 <= spot.node < pool.full_scale:
                self.found.append(f"{who}: node {spot.node} beyond full scale {pool.full_scale}")
            if spot.new_node != (spot.node >= pool.nodes):
                self.found.append(f"{who}: node {spot.node} new_node={spot.new_node} is wrong")
            node_sum[(cluster, pool.name, spot.node)].update(need.resources)

    def _caps_and_limits(self) -> None:
        """Running plus scheduled stays under every cap and concurrency limit; an amount already
        over a lowered cap may only stay, not grow."""
        added: dict[str, Counter[str]] = defaultdict(Counter)
        count: Counter[str] = Counter()
        runs: dict[str, set[str]] = defaultdict(set)

        def charge(queue: str, cluster: str, containers: list[Container], placed: Any) -> None:
            spots = {p.name: p for p in placed}
            for container in containers:
                spot = spots.get(container.name)
                if spot is None:
                    continue
                pool = self.oracle.pool_by_key.get((cluster, spot.node_pool))
                if pool is not None and pool.offers(need := self.oracle.need(container)):
                    added[queue].update(self.oracle.charges(need, pool))

        for start in self.result.environments_started:
            env = self.oracle.envs.get(start.environment)
            if env is not None:
                charge(env.queue, start.cluster, env.replica_containers(), start.containers)
        for s in self.result.scheduled:
            action = self.actions[s.action]
            count[action.queue] += 1
            runs[action.queue].add(action.run_id)
            if action.environment is None and s.cluster is not None:
                charge(action.queue, s.cluster, action.containers, s.containers)
        for queue in self.snap.queues:
            caps = self.oracle.caps(queue)
            used = self.oracle.queue_used[queue.name]
            for key, amount in added[queue.name].items():
                if amount and key in caps and used.get(key, 0) + amount > caps[key]:
                    self.found.append(
                        f"queue {queue.name}: {key} {used.get(key, 0)} running +"
                        f" {amount} scheduled > cap {caps[key]}"
                    )
            running = self.oracle.running_count[queue.name]
            for limit, what in ((queue.action_concurrency, "action"), (queue.depth, "depth")):
                if limit is not None and count[queue.name] and running + count[queue.name] > limit:
                    self.found.append(
                        f"queue {queue.name}: {running} running + {count[queue.name]} scheduled"
                        f" > {what} limit {limit}"
                    )
            active = self.oracle.active_runs[queue.name]
            new_runs = runs[queue.name] - active
            if (
                queue.run_concurrency is not None
                and new_runs
                and len(active) + len(new_runs) > queue.run_concurrency
            ):
                self.found.append(
                    f"queue {queue.name}: {len(active)} active runs + new {sorted(new_runs)}"
                    f" > run concurrency {queue.run_concurrency}"
                )

    def _strict_prefix(self) -> None:
        """A strict_fifo queue schedules a prefix of its line (pending, not failed, in arrival
        order); what follows its first unscheduled action is blocked_behind_head, and the queue
        reports head_blocked exactly then."""
        failed = {f.action for f in self.result.failed}
        waiting = {w.action: w for w in self.result.waiting}
        lines: dict[str, list[str]] = defaultdict(list)
        for action in global_order(self.snap):
            if action.id not in failed:
                lines[action.queue].append(action.id)
        for queue in self.snap.queues:
            line = lines[queue.name]
            metrics = self.result.queues.get(queue.name)
            if queue.scheduling is not Scheduling.STRICT_FIFO:
                if metrics is not None and metrics.head_blocked:
                    self.found.append(f"greedy queue {queue.name} reports head_blocked")
                continue
            head = next((i for i, a in enumerate(line) if a not in self.scheduled), None)
            if head is not None:
                for behind in line[head + 1 :]:
                    if behind in self.scheduled:
                        self.found.append(
                            f"{behind} scheduled behind the blocked head {line[head]}"
                        )
                    elif waiting[behind].reason is not WaitReason.HEAD_OF_LINE:
                        self.found.append(
                            f"{behind} behind head {line[head]} waits for"
                            f" {waiting[behind].reason}, not blocked_behind_head"
                        )
            if metrics is None:
                self.found.append(f"queue {queue.name} has no metrics")
            elif metrics.head_blocked != (head is not None):
                self.found.append(f"queue {queue.name}: head_blocked={metrics.head_blocked}")
            elif metrics.head_blocked and metrics.head_blocked_since is None:
                self.found.append(f"queue {queue.name}: head blocked without head_blocked_since")
