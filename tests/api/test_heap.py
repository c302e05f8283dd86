"""The API process's heap frozen between ticks (api.heap).

Issue 12: "the API's event loop and threads never wait on the solver or the GIL". Python's
full collection of the API process's line held the GIL for 20-90 ms, collecting nothing;
frozen after each tick, the line is left out of it, and nothing that becomes garbage is lost.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from api.heap import QuietHeap


class Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()


def test_after_a_tick_what_lives_is_frozen_and_the_ticks_cycles_are_gone() -> None:
    now = [0.0]
    heap = QuietHeap(600.0, clock=lambda: now[0])
    garbage = Cycle()
    gone = weakref.ref(garbage)
    del garbage
    kept = Cycle()
    heap.after_tick()
    assert gone() is None  # collected before the freeze, not frozen with the rest
    assert gc.get_freeze_count() > 0
    assert gc.is_tracked(kept)
    assert not any(o is kept for o in gc.get_objects())  # frozen: no collection looks at it


def test_a_frozen_cycle_that_becomes_garbage_is_collected_at_the_next_full_collection() -> None:
    now = [0.0]
    heap = QuietHeap(600.0, clock=lambda: now[0])
    cycle = Cycle()
    gone = weakref.ref(cycle)
    heap.after_tick()  # frozen while alive
    del cycle
    now[0] = 599.0
    heap.after_tick()
    assert gone() is not None  # frozen: no collection looks at it
    now[0] = 600.0
    heap.after_tick()
    assert gone() is None
    assert gc.get_freeze_count() > 0  # and what lives is frozen again
