"""Bodies of the reusable environments' API (api.routes.environments)."""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field

from api.schemas.common import Body, Quantities, to_domain
from api.store.records import EnvironmentRecord
from models.fields import Duration, parse_duration
from models.snapshot import DEFAULT_QUEUE, Environment


class EnvironmentIn(Body):
    """A reusable container pool: `replicas` containers of this size, charged once at start."""

    queue: str = Field(
        default=DEFAULT_QUEUE,
        description="The queue whose caps and concurrency the started pool is charged to.",
    )
    replicas: int = Field(
        default=1, ge=1, description="How many containers of this size the pool runs."
    )
    resources: Quantities = Field(default_factory=dict)
    gpu: str | int | None = Field(
        default=None,
        description='Each replica\'s GPUs: "H100:4", "T4" (typed) or 2 (untyped NVIDIA GPUs);'
        " null: no GPU.",
    )
    node_selector: dict[str, str] = Field(
        default_factory=dict,
        description="Labels a node pool must carry for the replicas to land on it.",
    )
    idle_timeout: str | float | None = Field(
        default=None,
        description="stop the running pool after this long with no scheduled or running action",
        examples=["10m"],
    )

    def to_environment(self, name: str) -> Environment:
        data = self.model_dump(exclude_none=True, exclude={"idle_timeout"})
        return to_domain(Environment, {"name": name, **data}, ())

    def idle_timeout_of(self) -> timedelta | None:
        if self.idle_timeout is None:
            return None
        return parse_duration(self.idle_timeout, "idle_timeout")


class EnvironmentPublic(Environment):
    """A reusable pool as the service keeps it: its settings, whether it runs and where."""

    idle_timeout: Duration | None = Field(
        default=None, description="the service stops it after this long unused"
    )

    @classmethod
    def of(cls, record: EnvironmentRecord) -> EnvironmentPublic:
        return cls.model_validate(
            record.environment.model_dump() | {"idle_timeout": record.idle_timeout}
        )
