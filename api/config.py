"""The tick service's settings: one object built by the CLI (or a test), never at import."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt


class TickWorker(StrEnum):
    """Where the service solves (api.solver_process)."""

    PROCESS = "process"  # a spawned worker process: the default of `sluice serve`
    THREAD = "thread"  # a thread of the server, for tests whose stand-in engine is a closure


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
    tick_worker: TickWorker = Field(
        default=TickWorker.PROCESS,
        description="Where ticks and explanations solve: process (a worker process, so"
        " requests never wait on the solver) or thread (in the server process, as tests with"
        " a stand-in engine need).",
    )
    tick_timeout_s: PositiveFloat | None = Field(
        default=None,
        description="Wall-clock seconds after which a tick's worker call counts as hung: the"
        " tick fails and the worker is replaced; by default ten periods, at least 30 s"
        " (process worker only: a thread cannot be stopped).",
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
    retain_finished_for: timedelta | None = Field(
        default=timedelta(days=7),
        description="Finished actions and jobs are deleted this long after they finished;"
        " None keeps them whatever their age. What /metrics counts of them stays counted.",
    )
    retain_finished: PositiveInt | None = Field(
        default=100_000,
        description="At most this many finished actions are kept (the newest), and as many"
        " finished jobs; None keeps any number.",
    )
    full_collection_every_s: PositiveFloat | None = Field(
        default=None,
        description="Seconds between full garbage collections of the API process, whose heap"
        " is otherwise frozen after each tick so that Python's own full collections skip the"
        " line (api.heap); None leaves collections to Python.",
    )
    retention_check_s: PositiveFloat = Field(
        default=60.0, description="Seconds between cleanups of finished actions and jobs."
    )
    demo: bool = False
    demo_seed: int = 7

    @property
    def time_limit_s(self) -> float:
        return self.tick_time_limit_s or 0.5 * self.period_s

    @property
    def wall_guard_s(self) -> float:
        return self.tick_wall_guard_s or 2 * self.time_limit_s

    @property
    def timeout_s(self) -> float:
        return self.tick_timeout_s or max(30.0, 10 * self.period_s)

    @property
    def head_explain_budget_s(self) -> float:
        """Wall time a tick may spend explaining blocked heads after its solve: half the
        model budget, so solve and explanations together stay within the period."""
        return 0.5 * self.time_limit_s
