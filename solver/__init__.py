"""Sluice's tick engine: one snapshot in, one TickResult out (see solver.tick)."""

from solver.tick import TickOptions, tick

__all__ = ["TickOptions", "tick"]
