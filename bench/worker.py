"""A benchmark step in its own process, so that each scenario's peak RSS is its own.

    python -m bench.worker generate NAME WIRE.json
    python -m bench.worker measure WIRE.json TICKS TIME_LIMIT_S [PROFILE.prof]

Each prints one JSON object on stdout (see bench.measure).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.measure import generate, measure


def main(argv: list[str]) -> None:
    step, *args = argv
    if step == "generate":
        name, wire = args
        report = generate(name, Path(wire))
    else:
        wire, ticks, limit, *profile = args
        report = measure(
            Path(wire), int(ticks), float(limit), Path(profile[0]) if profile else None
        )
    sys.stdout.write(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1:])
