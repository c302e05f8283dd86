"""What a fresh interpreter has imported after running some code: start-up cost checks."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterable


def loaded_after(code: str, modules: Iterable[str]) -> list[str]:
    """Which of `modules` a new Python process holds in `sys.modules` once `code` ran."""
    script = f"import sys\n{code}\nprint(sorted({sorted(set(modules))!r} & sys.modules.keys()))\n"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    loaded: list[str] = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    return loaded
