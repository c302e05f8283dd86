"""Which device model an untyped GPU container tries first: the one typed work needs least.

An untyped container may take whole GPUs of any NVIDIA model, so which model it lands on is
a free choice of the tick: where the tick is exact, its admissions (the lexicographic optimum)
do not depend on it. The ticks after do. Taken in the cluster's pool order (the openb fleet
lists pools by GPU count, so its few P100 and T4 nodes come first in every cluster), with
best-fit spreading work over the least loaded cluster, untyped work filled the scarce models
that typed work in the line was waiting for (docs/benchmarks.md#replay, D220).

So best-fit tries an untyped container's pools in order of their model's spare GPUs: free
GPUs of that model in the fleet at the tick's start less the GPUs the pending line asks for by
that model, most first (without typed demand, the most abundant free model first), the
cluster's own pool order breaking ties. The line's demand is counted once per tick, when the
first untyped container with a choice of models is placed: a heuristic for the ticks to come,
never a verdict.
"""

from __future__ import annotations

import numpy as np

from solver.placement.problem import GPU_DIM, Problem


class LandingOrder:
    """An untyped container's candidate pools of one cluster, the model with most spare first."""

    def __init__(self, problem: Problem, class_free: dict[str, np.ndarray]) -> None:
        self.problem = problem
        self.free = {device: int(free[GPU_DIM]) for device, free in class_free.items() if device}
        self.spare: dict[str, int] | None = None
        self.orders: dict[int, tuple[list[int], list[int]]] = {}  # id(pools) -> (pools, order)

    def rebased(self, problem: Problem, gained: dict[str, np.ndarray]) -> LandingOrder:
        """The order a tick of `problem` starts with, where `problem` is this one's with more
        room at the start (running work taken out, nodes or pools added): `gained` by kind of
        pool, as class_free counts it. A resumed walk then lands work as a whole tick would."""
        new = LandingOrder(problem, gained)
        for device, free in self.free.items():
            new.free[device] = new.free.get(device, 0) + free
        return new

    def order(self, pools: list[int]) -> list[int]:
        """`pools` (one cluster's compatible pools of an item, shared by every item of its
        shape) in the order to try them."""
        known = self.orders.get(id(pools))
        if known is not None and known[0] is pools:
            return known[1]
        devices = [self.problem.pools[p].device or "" for p in pools]
        if len(set(devices)) < 2:
            ordered = pools
        else:
            spare = self._spare()
            ranked = sorted(range(len(pools)), key=lambda i: (-spare.get(devices[i], 0), i))
            ordered = [pools[i] for i in ranked]
        self.orders[id(pools)] = (pools, ordered)
        return ordered

    def _spare(self) -> dict[str, int]:
        if self.spare is None:
            wanted: dict[str, int] = {}
            items = [item for action in self.problem.actions for item in action.items]
            items += [item for env in self.problem.envs if not env.running for item in env.items]
            for item in items:
                if item.gpus and item.device is not None:
                    wanted[item.device] = wanted.get(item.device, 0) + item.gpus
            self.spare = {d: free - wanted.get(d, 0) for d, free in self.free.items()}
        return self.spare
