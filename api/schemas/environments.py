"""Bodies of the reusable environments' API (api.routes.environments)."""

from __future__ import annotations

from pydantic import Field

from api.schemas.common import Body, Quantities, to_domain
from models.snapshot import DEFAULT_QUEUE, Environment


class EnvironmentIn(Body):
    """A reusable container pool: `replicas` containers of this size, charged once at start."""

    queue: str = DEFAULT_QUEUE
    replicas: int = Field(default=1, ge=1)
    resources: Quantities = Field(default_factory=dict)
    gpu: str | int | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)

    def to_environment(self, name: str) -> Environment:
        return to_domain(Environment, {"name": name, **self.model_dump(exclude_none=True)}, ())
