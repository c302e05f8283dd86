from __future__ import annotations

from pathlib import Path

import pytest

from models.scenario import snapshot_from_dict
from models.snapshot import Snapshot

FLEET = {
    "now": "2026-12-01T00:00:00Z",
    "queues": [
        {"name": "strict", "scheduling": "strict_fifo"},
        {"name": "greedy", "scheduling": "greedy_capacity"},
    ],
    "clusters": [
        {
            "name": "c",
            "node_pools": [
                {
                    "name": "p",
                    "node": {
                        "cpu": "8",
                        "memory": "64Gi",
                        "accelerator": "H100",
                        "accelerators": 4,
                    },
                    "nodes": 1,
                }
            ],
        }
    ],
}


@pytest.fixture
def fleet() -> Snapshot:
    """One node of 4 H100s: small enough that every start in a test can be worked by hand."""
    return snapshot_from_dict(FLEET)


@pytest.fixture
def fleet_file(tmp_path: Path) -> Path:
    import yaml

    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(FLEET))
    return path
