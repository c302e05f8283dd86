"""A seeded random run of a few hundred ticks, checking the quota invariants on every tick.

Issue: "a randomized test that checks on every tick that no limit is exceeded, no RESERVE
capacity is ever used by another share, and every preempted job is back in its line."
Seed: RESERVE - "Andere shares kunnen deze ongebruikte capaciteit niet gebruiken." (Other
shares cannot use this unused capacity.) LEND_AND_BORROW - "... mogen ook ongebruikte capaciteit
lenen, binnen een ingestelde leenlimiet." (... may borrow unused capacity within a configured
borrow limit.) "Een Service Environment ... maximale capaciteit van 3" (the environment's
maximum). Lowering a limit: "kunnen jobs in die share voor preëmptie in aanmerking komen, zelfs
bij LEND of RESERVE" (its jobs can become eligible for preemption, even under LEND or RESERVE).

Jobs arrive and finish at random (mostly for one busy share at a time, so shares go idle and
busy in turn), and now and then an admin lowers or raises a share's limit, changes its
strategy, or moves the environment's maximum. Share limits are changed so that they sum to at
most the maximum, which makes "RESERVE capacity is never used by another share" a checkable
sum; a lowered maximum can break that, and the RESERVE sum is then checked only once the
maximum is back up.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import replace
from datetime import timedelta

import pytest

from models.quota import Job, JobState, QuotaShare, ShareStrategy
from models.quota_result import PreemptReason, QuotaTickResult
from solver.quota.tick import next_jobs
from tests.support.quota_builders import G5, P3, World, share, world

SEEDS = (4, 5, 12, 15)  # together they go through every kind of preemption
TICKS = 100
TYPES = (G5, P3)
ENVIRONMENT_MAX = {G5: 8, P3: 4}
STRATEGIES = tuple(ShareStrategy)
BORROW_LIMITS = (None, None, 0, 50, 100, 300)

Key = tuple[str, str]  # (share, instance type)


def _random_share(rng: random.Random, name: str, limits: dict[str, int]) -> QuotaShare:
    # Borrowers make the lending, borrowing and reclaim happen; give them the larger part.
    strategy = rng.choice((*STRATEGIES, ShareStrategy.LEND_AND_BORROW))
    return share(
        name,
        strategy,
        limits,
        borrow_limit=rng.choice(BORROW_LIMITS) if strategy.borrows else None,
        in_share_preemption=rng.random() < 0.5,
    )


def _random_world(rng: random.Random) -> World:
    """Four shares whose limits split each type's maximum with little or nothing unassigned."""
    maximum = {t: rng.randint(top // 2, top) for t, top in ENVIRONMENT_MAX.items()}
    types = [rng.sample(TYPES, rng.randint(1, 2)) for _ in range(4)]
    limits: list[dict[str, int]] = [{} for _ in range(4)]
    for t in TYPES:
        holders = [i for i in range(4) if t in types[i]]
        left = maximum[t] - rng.randint(0, 1)
        for n, i in enumerate(holders):
            limits[i][t] = left if n == len(holders) - 1 else rng.randint(0, left)
            left -= limits[i][t]
    return world([_random_share(rng, f"s{i}", limits[i]) for i in range(4)], maximum)


def _admin_change(rng: random.Random, w: World) -> World:
    """Lower or raise one limit (sums stay within the environment), change a strategy, or move
    the environment's maximum (which may leave the limits summing to more than it)."""
    queue = w.job_queues[0]
    maximum = w.environments[0].capacity_limits
    if rng.random() < 0.15:
        t = rng.choice(TYPES)
        environment = w.environments[0].model_copy(
            update={"capacity_limits": {**maximum, t: rng.randint(1, ENVIRONMENT_MAX[t])}}
        )
        return replace(w, environments=[environment])
    old = rng.choice(queue.quota_shares)
    if rng.random() < 0.7:
        t = rng.choice(sorted(old.capacity_limits))
        others = sum(s.capacity_limits.get(t, 0) for s in queue.quota_shares if s is not old)
        lowered = rng.random() < 0.6
        top = (
            old.capacity_limits[t] if lowered else max(old.capacity_limits[t], maximum[t] - others)
        )
        new = old.model_copy(
            update={"capacity_limits": {**old.capacity_limits, t: rng.randint(0, top)}}
        )
    else:
        new = _random_share(rng, old.name, old.capacity_limits)
    shares = [new if s is old else s for s in queue.quota_shares]
    return replace(w, job_queues=[queue.model_copy(update={"quota_shares": shares})])


def _step(rng: random.Random, w: World, serial: int, hot: str) -> tuple[World, int]:
    """Some holders finish, a few jobs arrive (mostly for the busy share of the moment, so
    shares go idle and busy in turn and lend, borrow and reclaim), and now and then the
    admin changes a share."""
    jobs = [j for j in w.jobs if not (j.state.holds_capacity and rng.random() < 0.15)]
    queue = w.job_queues[0]
    for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
        target = queue.share(hot) if rng.random() < 0.7 else rng.choice(queue.quota_shares)
        assert target is not None
        serial += 1
        jobs.append(
            Job(
                id=f"j{serial}",
                job_queue=queue.name,
                share=target.name,
                instance_type=rng.choice(sorted(target.capacity_limits)),
                count=rng.choice((1, 1, 1, 2)),
                priority=rng.randint(0, 3),
                submitted_at=w.now,
            )
        )
    w = replace(w, jobs=jobs)
    if rng.random() < 0.1:
        w = _admin_change(rng, w)
    return w, serial


def _held(jobs: list[Job]) -> dict[Key, int]:
    held: dict[Key, int] = defaultdict(int)
    for j in jobs:
        if j.state.holds_capacity:
            held[(j.share, j.instance_type)] += j.count
    return held


def _check(before: World, result: QuotaTickResult, after: list[Job], seen: Counter[str]) -> None:
    queue = before.job_queues[0]
    maximum = before.environments[0].capacity_limits
    shares = {s.name: s for s in queue.quota_shares}
    held_before, held_after = _held(before.jobs), _held(after)
    admitted = {(s.share, s.instance_type) for s in result.scheduled}

    def limit(name: str, t: str) -> int:
        return shares[name].capacity_limits.get(t, 0)

    for t in TYPES:
        # The environment's maximum is never exceeded.
        assert sum(held_after[(s, t)] for s in shares) <= maximum[t]
        for name, s in shares.items():
            cap = min(maximum[t], limit(name, t) + s.borrowable(t, maximum[t]))
            if (name, t) in admitted:
                # A share that starts a job ends within its limit (plus its borrow limit).
                assert held_after[(name, t)] <= cap, (name, t)
            else:
                # Above a lowered limit a share may keep what it has, never gain.
                assert held_after[(name, t)] <= max(cap, held_before[(name, t)]), (name, t)
        # RESERVE capacity is never used by another share: with limits summing to at most the
        # maximum, the others hold no more than what RESERVE shares neither hold nor reserve.
        # (After the maximum is lowered below the limits' sum, not every limit can be honoured;
        # what holds then is the environment bound above and the borrowing bound below.)
        reserve = [n for n, s in shares.items() if s.strategy is ShareStrategy.RESERVE]
        if sum(limit(n, t) for n in shares) <= maximum[t]:
            others = sum(held_after[(n, t)] for n in shares if n not in reserve)
            kept_back = sum(max(limit(n, t), held_after[(n, t)]) for n in reserve)
            assert others <= maximum[t] - kept_back, t
        # Borrowing only takes idle capacity: if any share borrows more than before, everything
        # that held capacity before plus everything started would fit the environment, and its
        # use beyond own limits would fit lenders' limits and unassigned capacity.
        grew = [
            n
            for n in shares
            if max(0, held_after[(n, t)] - limit(n, t)) > max(0, held_before[(n, t)] - limit(n, t))
        ]
        if grew:
            started = Counter(
                {
                    n: sum(
                        s.count for s in result.scheduled if (s.share, s.instance_type) == (n, t)
                    )
                    for n in shares
                }
            )
            undisturbed = {n: held_before[(n, t)] + started[n] for n in shares}
            lenders = [n for n, s in shares.items() if s.strategy.lends]
            unassigned = max(0, maximum[t] - sum(limit(n, t) for n in shares))
            assert sum(undisturbed.values()) <= maximum[t], (t, grew)
            load = sum(undisturbed[n] for n in lenders) + sum(
                max(0, undisturbed[n] - limit(n, t)) for n in reserve
            )
            assert load <= sum(limit(n, t) for n in lenders) + unassigned, (t, grew)

    # Every preempted job is back in its line: QUEUED again, same arrival, in line order.
    by_id = {j.id: j for j in after}
    position = {j.id: i for i, j in enumerate(after)}
    for name, usage in result.job_queues[queue.name].shares.items():
        queued = [j for j in after if j.share == name and j.state is JobState.QUEUED]
        queued.sort(key=lambda j: (-j.priority, j.submitted_at, position[j.id]))
        assert usage.line == [j.id for j in queued], name
    original = {j.id: j for j in before.jobs}
    for p in result.preempted:
        again = by_id[p.job]
        assert again.state is JobState.QUEUED and again.started_at is None
        assert again.submitted_at == original[p.job].submitted_at
        assert result.job_queues[queue.name].shares[p.share].line[p.position] == p.job
        assert original[p.job].state.holds_capacity
        seen[p.reason.value] += 1
        _check_cause(p.reason, p.job, p.beneficiary, before, held_before, shares, maximum)

    # Nothing is lost: every job either holds capacity, waits, or failed.
    decided = {j.id for j in after} | {f.job for f in result.failed}
    assert decided == {j.id for j in before.jobs}
    seen["scheduled"] += len(result.scheduled)


def _check_cause(
    reason: PreemptReason,
    victim_id: str,
    beneficiary: str | None,
    before: World,
    held_before: dict[Key, int],
    shares: dict[str, QuotaShare],
    maximum: dict[str, int],
) -> None:
    """Each preemption has one of the causes the seed names."""
    jobs = {j.id: j for j in before.jobs}
    victim = jobs[victim_id]
    t = victim.instance_type
    if reason is PreemptReason.IN_SHARE:
        assert beneficiary is not None
        winner = jobs[beneficiary]
        assert shares[victim.share].in_share_preemption
        assert winner.share == victim.share and winner.priority > victim.priority
    elif reason is PreemptReason.ENVIRONMENT_LIMIT:
        assert sum(held_before[(s, t)] for s in shares) > maximum[t]
    else:  # reclaim or over a lowered limit: the victim's share held more than its own limit
        assert held_before[(victim.share, t)] > shares[victim.share].capacity_limits.get(t, 0)


@pytest.mark.slow
def test_invariants_hold_on_every_tick() -> None:
    seen: Counter[str] = Counter()
    for seed in SEEDS:
        rng = random.Random(seed)
        w = _random_world(rng)
        serial = 0
        hot = "s0"
        for _ in range(TICKS):
            if rng.random() < 0.15:
                hot = rng.choice(w.job_queues[0].quota_shares).name
            w, serial = _step(rng, w, serial, hot)
            result = w.tick()
            after = next_jobs(w.jobs, result)
            _check(w, result, after, seen)
            w = replace(w, jobs=after, now=w.now + timedelta(minutes=rng.randint(1, 10)))
    # The run did real work and went through every kind of preemption.
    assert seen["scheduled"] > len(SEEDS) * TICKS // 2, seen
    assert all(seen[reason.value] for reason in PreemptReason), seen
