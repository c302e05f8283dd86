"""The API process's long-lived objects, kept out of Python's full collections.

The API process holds the line: the live actions, the last tick's decisions, explanations and
forecasts, about 110,000 tracked objects with 10,000 queued. They outlive every young
collection, so Python's full collection scans all of them again every few seconds under load,
holding the GIL for 20-90 ms while requests wait, and finds nothing to collect (measured in
docs/benchmarks.md, "The API process's full collections"). After each tick the young
generations are collected (the tick's own cyclic garbage goes there), then everything left is
frozen (`gc.freeze`): later full collections skip it. A cycle among frozen objects that became
garbage since would never be collected, so now and then everything is unfrozen and collected
once.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable


class QuietHeap:
    """Freezes the heap after each tick; unfreezes and collects it all every `full_every_s`."""

    def __init__(self, full_every_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.full_every_s = full_every_s
        self.clock = clock
        self._last_full = clock()

    def after_tick(self, _stats: object = None) -> None:
        now = self.clock()
        if now - self._last_full >= self.full_every_s:
            gc.unfreeze()
            gc.collect()
            self._last_full = now
        else:
            gc.collect(1)
        gc.freeze()
