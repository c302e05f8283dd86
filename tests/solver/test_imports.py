"""What importing the engine costs a command that ticks (`sluice solve`, a tick worker)."""

from __future__ import annotations

from tests.support.imports import loaded_after


def test_the_tick_imports_neither_the_cp_sat_model_api_nor_pandas() -> None:
    """Issue 12: "its cost (install time, import time, JIT warm-up) counts in the
    measurements below." OR-Tools' model API imports pandas, 0.2 s of every start-up; the
    tick writes its models through `cp_model_helper` and reads CP-SAT's statuses there
    (D436), and a quota solve imports the API when it runs."""
    model_api = ["pandas", "ortools.sat.python.cp_model"]
    assert loaded_after("import api.cli.service, solver", model_api) == []
