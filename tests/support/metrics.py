"""Reading a /metrics scrape with prometheus_client's own parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample


def samples(text: str) -> list[Sample]:
    """Every sample of a scrape; the parser raises on text Prometheus would not read."""
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def families(text: str) -> dict[str, str]:
    """Metric family name -> type (counter, gauge, histogram, info, ...)."""
    return {family.name: family.type for family in text_string_to_metric_families(text)}


def value(text: str, name: str, **labels: str) -> float | None:
    """The value of the sample `name` with exactly these labels, None when there is none."""
    found = [s.value for s in samples(text) if s.name == name and s.labels == labels]
    assert len(found) <= 1, f"{name}{labels} appears {len(found)} times"
    return found[0] if found else None
