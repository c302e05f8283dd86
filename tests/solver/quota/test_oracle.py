"""The quota model against a brute-force oracle on small random instances.

The oracle enumerates every admit/keep assignment of one pool, keeps those the written
rules allow (docs/engine/quota-model.md, "The model"), and picks the staged optimum: own-capacity
admissions lexicographically in admission order, then borrowing ones, then the victim rule
(fewest preempted instances, then keep in protection order). The CP-SAT model must decide
exactly the same, also when its lexicographic blocks are cut to three literals so that every
stage runs over several blocks.

Seed sentences these rules come from: "Als een share capaciteit heeft uitgeleend en die zelf
nodig krijgt, kan AWS Batch geleende capaciteit terughalen door jobs in andere shares te
preëmpten." (When a share needs capacity it lent, borrowed capacity may be taken back by
preempting jobs in other shares.) "Binnen een share kan optionele preëmptie jobs met een lagere
prioriteit verdringen." (Within a share, optional preemption lets higher-priority jobs displace
lower-priority ones.) RESERVE: "Andere shares kunnen deze ongebruikte capaciteit niet gebruiken."
(Other shares cannot use this unused capacity.)
"""

from __future__ import annotations

import itertools
import random

import pytest

import solver.quota.cp_model as quota_model
from models.quota import ShareStrategy
from solver.quota.cp_model import QuotaModel, QuotaSolveBudget
from solver.quota.problem import Candidate, Holder, Pool, QuotaProblem, compile_problem
from tests.support.quota_builders import G5, NOW, job, share, world

INSTANCES = 150
MAX_DECISIONS = 10


def _instance(rng: random.Random) -> QuotaProblem:
    shares = [
        share(
            f"s{i}",
            rng.choice(list(ShareStrategy)),
            {G5: rng.randint(0, 3)},
            in_share_preemption=rng.random() < 0.5,
        )
        for i in range(rng.randint(2, 3))
    ]
    shares = [
        s.model_copy(update={"borrow_limit": rng.choice((None, 0, 100))})
        if s.strategy.borrows
        else s
        for s in shares
    ]
    jobs = []
    for i in range(rng.randint(0, 5)):
        jobs.append(
            job(
                f"h{i}",
                rng.choice(shares).name,
                count=rng.randint(1, 2),
                priority=rng.randint(0, 2),
                arrived=60 - i,
                ran=rng.randint(1, 50),
            )
        )
    for i in range(rng.randint(1, 5)):
        jobs.append(
            job(
                f"q{i}",
                rng.choice(shares).name,
                count=rng.randint(1, 2),
                priority=rng.randint(0, 2),
                arrived=rng.randint(0, 40),
            )
        )
    w = world(shares, {G5: rng.randint(2, 5)}, jobs)
    return compile_problem(w.policies, w.environments, w.job_queues, w.jobs, NOW)


def _allowed(problem: QuotaProblem, pool: Pool, admit: set[str], stopped: set[str]) -> bool:
    """The rules of the model, written out directly for one pool."""
    new: dict[str, list[Candidate]] = {n: [] for n in pool.slots}
    for c in problem.candidates:
        new[c.job.share].append(c)
    held: dict[str, list[Holder]] = {n: [] for n in pool.slots}
    for h in problem.holders:
        held[h.job.share].append(h)
    usage = {
        n: sum(h.job.count for h in held[n] if h.job.id not in stopped)
        + sum(c.job.count for c in new[n] if c.job.id in admit)
        for n in pool.slots
    }
    for n, slot in pool.slots.items():
        admitted_here = [c for c in new[n] if c.job.id in admit]
        if admitted_here and usage[n] > slot.cap:
            return False
        for h in held[n]:
            if h.job.id not in stopped:
                continue
            for c in admitted_here:  # in-share: only for a higher priority, and only if on
                if not slot.share.in_share_preemption or c.job.priority <= h.job.priority:
                    return False
            if h.in_share_only and not any(c.job.priority > h.job.priority for c in admitted_here):
                return False
    charged = {n: max(usage[n], s.protected) for n, s in pool.slots.items()}
    if not _fits(pool, charged):
        return False
    grows = any(
        s.share.strategy.borrows and usage[n] - s.limit > s.borrowed_before
        for n, s in pool.slots.items()
    )
    if grows:
        admitted = {n: sum(c.job.count for c in new[n] if c.job.id in admit) for n in pool.slots}
        return _fits(pool, {n: s.placed + admitted[n] for n, s in pool.slots.items()})
    return True


def _fits(pool: Pool, charged: dict[str, int]) -> bool:
    """Environment maximum, and use beyond own limits covered by lenders and unassigned."""
    if sum(charged.values()) > pool.maximum:
        return False
    lending = sum(s.limit for s in pool.slots.values() if s.share.strategy.lends)
    load = sum(
        charged[n] if s.share.strategy.lends else max(0, charged[n] - s.limit)
        for n, s in pool.slots.items()
    )
    return load <= lending + pool.unassigned


def _oracle(problem: QuotaProblem) -> tuple[set[str], set[str]]:
    (pool,) = problem.pools.values()
    order = problem.candidates
    eligible = [h for h in problem.holders if h.eligible]
    options = []
    for admit_bits in itertools.product((0, 1), repeat=len(order)):
        admit = {c.job.id for c, bit in zip(order, admit_bits, strict=True) if bit}
        for stop_bits in itertools.product((0, 1), repeat=len(eligible)):
            stopped = {h.job.id for h, bit in zip(eligible, stop_bits, strict=True) if bit}
            if _allowed(problem, pool, admit, stopped):
                options.append((admit, stopped))

    def own(admit: set[str], stopped: set[str]) -> tuple[int, ...]:
        """Stage 1's literals: admitted, and the share borrows no more than it did."""
        bits = []
        for c in order:
            slot = pool.slots[c.job.share]
            held = sum(
                h.job.count
                for h in problem.holders
                if h.job.share == c.job.share and h.job.id not in stopped
            )
            used = held + sum(
                x.job.count for x in order if x.job.share == c.job.share and x.job.id in admit
            )
            grew = slot.share.strategy.borrows and used - slot.limit > slot.borrowed_before
            bits.append(int(c.job.id in admit and not grew))
        return tuple(bits)

    best_own = max(own(a, s) for a, s in options)
    borrowers = {c.job.id for c in order if pool.slots[c.job.share].share.strategy.borrows}
    own_admitted = {c.job.id for c, bit in zip(order, best_own, strict=True) if bit}
    options = [
        (a, s)
        for a, s in options
        if own_admitted <= a
        and all(
            c.job.id in borrowers or c.job.id in own_admitted or c.job.id not in a for c in order
        )
    ]
    open_ = [c.job.id for c in order if c.job.id in borrowers and c.job.id not in own_admitted]
    best_borrow = max(tuple(int(j in a) for j in open_) for a, _ in options)
    options = [(a, s) for a, s in options if tuple(int(j in a) for j in open_) == best_borrow]
    count = {h.job.id: h.job.count for h in eligible}
    fewest = min(sum(count[j] for j in s) for _, s in options)
    options = [(a, s) for a, s in options if sum(count[j] for j in s) == fewest]
    protection = sorted(eligible, key=problem.protection)
    admit, stopped = max(
        options, key=lambda o: tuple(int(h.job.id not in o[1]) for h in protection)
    )
    return admit, {h.job.id for h in eligible if h.job.id not in stopped}


@pytest.mark.parametrize("objective_bits", [quota_model.OBJECTIVE_BITS, 4])
def test_the_model_decides_what_the_oracle_decides(
    objective_bits: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(quota_model, "OBJECTIVE_BITS", objective_bits)
    rng = random.Random(5)
    checked = 0
    while checked < INSTANCES:
        problem = _instance(rng)
        eligible = sum(h.eligible for h in problem.holders)
        if not problem.candidates and not eligible:
            continue
        if len(problem.candidates) + eligible > MAX_DECISIONS:
            continue
        budget = QuotaSolveBudget(time_limit_s=5.0, seed=0)
        decision = QuotaModel(problem).decide(budget)
        assert not budget.limit_hit
        expected_admit, expected_kept = _oracle(problem)
        assert (decision.admitted, decision.kept) == (expected_admit, expected_kept), checked
        checked += 1
