"""How a tick's answer was reached: shared by the capped queues' and the quota tick's results."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field


class SolverStatus(StrEnum):
    """How the tick's answer was reached."""

    GREEDY_EXACT = "greedy_exact"  # first-fit placed everything the caps allowed: no model needed
    OPTIMAL = "optimal"  # the model decided every contested action
    LIMIT_REACHED = "limit_reached"  # time ran out; undecided actions keep the best plan found
    NOTHING_TO_DO = "nothing_to_do"


class SolverInfo(BaseModel):
    status: SolverStatus
    wall_time_s: float
    limit_hit: bool
    phases_s: dict[str, float] = Field(default_factory=dict)
    contested: int = 0  # actions best-fit could not place, each decided by the model or a bound
    model_solves: int = 0
    largest_model_variables: int = 0
    # Checks whose model was limited to the nodes near the action (the tick was too large to let
    # every admission move) and found no room: such a refusal is likely but not proven exact.
    unproven_refusals: int = 0
