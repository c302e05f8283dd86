"""The service's wall-clock guard: a service setting, off everywhere else.

Issue 12, item 4: "If the service needs a wall-clock guard to keep its period, it is a service
setting, it is off for `sluice solve`, what-if and explanations, and a tick cut by it says so
in `solver` (a separate flag from the deterministic limit)."
"""

from __future__ import annotations

from api.config import ServiceSettings
from api.metrics import tick_metric_families
from api.ticker import TickStats


def test_the_guard_defaults_to_twice_the_time_limit_and_can_be_set() -> None:
    settings = ServiceSettings(period_s=2.0)
    assert settings.time_limit_s == 1.0 and settings.wall_guard_s == 2.0
    assert ServiceSettings(tick_time_limit_s=3.0).wall_guard_s == 6.0
    assert ServiceSettings(tick_wall_guard_s=0.5).wall_guard_s == 0.5


def test_metrics_count_guarded_ticks_and_isolated_input() -> None:
    stats = TickStats(wall_guard_hits=3, rejected_actions=2, skipped_pools=1)
    samples = {s.name: s.value for f in tick_metric_families(stats) for s in f.samples}
    assert samples["sluice_tick_wall_guard_hits_total"] == 3
    assert samples["sluice_tick_rejected_actions_total"] == 2
    assert samples["sluice_tick_skipped_pools"] == 1
