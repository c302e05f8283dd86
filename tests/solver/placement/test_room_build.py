"""The compiled ledger (solver/placement/room.pyx) is what the tests run: a build older than
its source would test yesterday's engine, so this says how to build it again."""

from pathlib import Path

import solver.placement.room as room


def test_the_compiled_ledger_is_built_from_its_current_source() -> None:
    built = Path(room.__file__)
    source = Path(__file__).parents[3] / "solver" / "placement" / "room.pyx"
    assert built.suffix != ".pyx", "the ledger must be compiled: run `pip install -e .`"
    assert built.stat().st_mtime >= source.stat().st_mtime, (
        "solver/placement/room.pyx changed since it was built: run `pip install -e .`"
        " (or `python setup.py build_ext --inplace`) again"
    )
