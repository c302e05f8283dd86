"""`python -m bench`: see bench.cli."""

from bench.cli import bench

bench(prog_name="python -m bench")
