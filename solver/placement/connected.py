"""Pools connected by the work that may use them.

Two pools are connected when one container of the line (of a pending action or of an
environment to start) may use both; a component is a set of pools connected through any
chain of such containers. Placing work, or moving placed work, only ever shifts room
between pools one container may use, so room added to, or freed on, some pools can only
reach a container through the component of those pools: a container whose pools all lie in
other components has no more room than before (solver.explain.patch.reaches_room).

That holds for a move of one container. Where every placed unit may move anywhere in one
check (a small tick: solver.placement.decide.EXACT_NEIGHBOURHOOD_UNITS), a move may carry a
whole unit: its containers share a cluster, so one moved to a pool with room added drags the
others out of theirs, and the room they leave goes to work of any queue. And a queue whose
untyped GPUs meet a device cap charges that cap by where they land, so moving one of its
units lifts the cap for the others. Components `whole_units` join those too: every pool of
one unit's containers, and every pool of such a queue's units.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from solver.placement.problem import Item, Problem
from solver.placement.repair import charges_by_placement


def pool_components(problem: Problem, whole_units: bool = False) -> np.ndarray:
    """Each pool's component, named by one of its pools (the line's containers, and the
    containers of its environments; with `whole_units`, as the module says)."""
    lists = [action.items for action in problem.actions]
    lists += [env.items for env in problem.envs]
    if whole_units:
        # Per queue, its containers of distinct pools (they share the array).
        by_queue: dict[int, dict[int, Item]] = {}
        for queue, items in [*((a.queue, a.items) for a in problem.actions),
                             *((e.queue, e.items) for e in problem.envs)]:  # fmt: skip
            by_queue.setdefault(queue, {}).update((id(i.all_pools), i) for i in items)
        distinct = {q: list(items.values()) for q, items in by_queue.items()}
        lists += [items for q, items in distinct.items() if charges_by_placement(problem, q, items)]
    return joined(np.arange(len(problem.pools), dtype=np.int64), lists, whole_units)


def joined(
    components: np.ndarray, item_lists: Iterable[list[Item]], whole_units: bool = False
) -> np.ndarray:
    """`components` (as pool_components names them) joined by these containers' pools too;
    with `whole_units`, every pool of one list joined."""
    parent = components.tolist()

    def root(p: int) -> int:
        while parent[p] != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    def join(pools: list[int]) -> None:
        if len(pools) < 2:
            return
        first = root(pools[0])
        for p in pools[1:]:
            other = root(p)
            if other != first:
                parent[other] = first

    # Containers of one shape share their pools' array, and the actions of a queue with equal
    # containers one list of them (compile_snapshot, match_pools_again).
    seen: set[int] = set()
    for items in item_lists:
        if whole_units:
            if id(items) not in seen:
                seen.add(id(items))
                join([p for item in items for p in item.all_pools.tolist()])
            continue
        for item in items:
            if id(item.all_pools) not in seen:
                seen.add(id(item.all_pools))
                join(item.all_pools.tolist())
    return np.array([root(p) for p in range(len(parent))], dtype=np.int64)
