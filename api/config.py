"""The tick service's settings: one object built by the CLI (or a test), never at import."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat


class ServiceSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    db_path: Path = Path("sluice.db")
    period_s: PositiveFloat = 2.0
    tick_time_limit_s: PositiveFloat | None = Field(
        default=None,
        description="The model's budget per tick; by default half the period, which leaves the"
        " other half for reading the store, the per-action passes and writing back.",
    )
    tick_wall_guard_s: PositiveFloat | None = Field(
        default=None,
        description="Wall-clock seconds after which a tick starts no further model check, so"
        " a loaded machine still keeps the period; by default twice the time limit. A tick it"
        " cuts says so in solver.wall_guard_hit (its answer then depends on the load).",
    )
    auth_file: Path | None = None  # None: the server runs open (every caller is admin)
    demo: bool = False
    demo_seed: int = 7

    @property
    def time_limit_s(self) -> float:
        return self.tick_time_limit_s or 0.5 * self.period_s

    @property
    def wall_guard_s(self) -> float:
        return self.tick_wall_guard_s or 2 * self.time_limit_s
