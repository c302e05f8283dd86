"""Pools connected by the containers that may use them.

Two pools are connected when one container of the line (of a pending action or of an
environment to start) may use both; a component is a set of pools connected through any
chain of such containers. Placing work, or moving placed work, only ever shifts room
between pools one container may use, so room added to, or freed on, some pools can only
reach a container through the component of those pools: a container whose pools all lie in
other components has no more room than before (solver.explain.patch.reaches_room).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from solver.placement.problem import Item, Problem


def pool_components(problem: Problem) -> np.ndarray:
    """Each pool's component, named by one of its pools (the line's containers, and the
    containers of its environments)."""
    lists = [action.items for action in problem.actions]
    lists += [env.items for env in problem.envs]
    return joined(np.arange(len(problem.pools), dtype=np.int64), lists)


def joined(components: np.ndarray, item_lists: Iterable[list[Item]]) -> np.ndarray:
    """`components` (as pool_components names them) joined by these containers' pools too."""
    parent = components.tolist()

    def root(p: int) -> int:
        while parent[p] != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    seen: set[int] = set()  # equal container lists share their items (compile_snapshot)
    for items in item_lists:
        for item in items:
            if id(item) in seen:
                continue
            seen.add(id(item))
            pools = item.all_pools.tolist()
            if len(pools) < 2:
                continue
            first = root(pools[0])
            for p in pools[1:]:
                other = root(p)
                if other != first:
                    parent[other] = first
    return np.array([root(p) for p in range(len(parent))], dtype=np.int64)
