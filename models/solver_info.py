"""How a tick's answer was reached: shared by the capped queues' and the quota tick's results."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field


class SolverStatus(StrEnum):
    """How the tick's answer was reached."""

    GREEDY_EXACT = "greedy_exact"  # first-fit placed everything the caps allowed: no model needed
    OPTIMAL = "optimal"  # the model decided every contested action
    # The deterministic limit (or the service's wall-clock guard) ran out; undecided actions
    # keep the best plan found.
    LIMIT_REACHED = "limit_reached"
    NOTHING_TO_DO = "nothing_to_do"


class SolverInfo(BaseModel):
    status: SolverStatus
    wall_time_s: float
    limit_hit: bool  # the deterministic limit ran out: the same input always hits it
    # The service's wall-clock guard (solver.TickOptions.wall_guard_s) stopped the model checks:
    # this answer depends on the machine's load. Never set by `sluice solve`, what-if or
    # explanations, which run without a guard.
    wall_guard_hit: bool = False
    phases_s: dict[str, float] = Field(default_factory=dict)
    contested: int = 0  # actions best-fit could not place, each decided by the model or a bound
    model_solves: int = 0
    largest_model_variables: int = 0
    # Checks whose model was limited to the nodes near the action (the tick was too large to let
    # every admission move) and found no room: such a refusal is likely but not proven exact.
    unproven_refusals: int = 0
    # Input the engine cannot represent, isolated so the rest of the line is still decided:
    # pending actions failed INFEASIBLE for a value out of range, node pools left out.
    rejected_actions: int = 0
    skipped_pools: int = 0

    @property
    def cut_short(self) -> bool:
        """A limit, deterministic or the wall-clock guard, stopped the model checks."""
        return self.limit_hit or self.wall_guard_hit
