"""The tick service's settings: one object built by the CLI (or a test), never at import."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt


class ServiceSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    database: str | Path = Field(
        default=Path("sluice.db"),
        description="A SQLite file, or a postgresql:// URL (api.store.backends).",
    )
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
    max_body_bytes: PositiveInt = Field(
        default=16 * 2**20,
        description="The largest request body accepted; a larger one is refused with 413"
        " before it is read (a batch of 10,000 small actions is about 1.2 MiB).",
    )
    max_watchers: PositiveInt = Field(
        default=64, description="Server-sent event streams open at once; one more is 429."
    )
    watch_keepalive_s: PositiveFloat = Field(
        default=15.0,
        description="Seconds between keep-alive comments on an idle stream, well under the"
        " idle timeouts of common proxies (60 s for nginx and AWS load balancers).",
    )
    demo: bool = False
    demo_seed: int = 7

    @property
    def time_limit_s(self) -> float:
        return self.tick_time_limit_s or 0.5 * self.period_s

    @property
    def wall_guard_s(self) -> float:
        return self.tick_wall_guard_s or 2 * self.time_limit_s
