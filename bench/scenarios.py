"""The benchmark's scenarios by name, built on demand from the generators in fixtures/.

The generators live in the repository's fixtures/ folder, which is not an
installed package: they are imported when a scenario is built, from a process
whose working directory is the repository (the benchmark starts its workers there).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from models.snapshot import Snapshot


def _m() -> Snapshot:
    from fixtures.generators.synthetic import M, synthetic

    return synthetic(M)


def _l() -> Snapshot:
    from fixtures.generators.synthetic import L, synthetic

    return synthetic(L)


def _fragmentation() -> Snapshot:
    from fixtures.generators.synthetic import fragmentation

    return fragmentation()


def _alibaba_cold() -> Snapshot:
    from fixtures.generators.alibaba import alibaba

    return alibaba("cold")


def _alibaba_steady() -> Snapshot:
    from fixtures.generators.alibaba import alibaba

    return alibaba("steady")


@dataclass(frozen=True)
class Scenario:
    name: str
    about: str
    build: Callable[[], Snapshot]


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("m", "synthetic M: 10,000 pending, 1,000 running, 50 queues, 100 pools", _m),
        Scenario("l", "synthetic L: 50,000 pending, 5,000 running, 200 queues, 300 pools", _l),
        Scenario(
            "fragmentation", "2/4/8-GPU containers on partly full 8-GPU nodes", _fragmentation
        ),
        Scenario("alibaba-cold", "Alibaba trace: all 8,152 pods on empty nodes", _alibaba_cold),
        Scenario(
            "alibaba-steady", "Alibaba trace: fleet 85% full, 300 pods arriving", _alibaba_steady
        ),
    )
}
DEFAULT = ("m", "fragmentation", "alibaba-cold", "alibaba-steady")
"""What `python -m bench` runs without --scenario (L takes minutes: ask for it)."""


def build(name: str) -> Snapshot:
    return SCENARIOS[name].build()
