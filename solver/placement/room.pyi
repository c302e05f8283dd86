"""Types of the compiled ledger (room.pyx), for mypy: what Python code may call."""

from collections.abc import Callable, Container, Sequence
from typing import Any

import numpy as np

from models.resources import ResourceVector
from solver.placement.best_fit import PassVerdicts, PassWords
from solver.placement.cp_model import Unit
from solver.placement.decide import NoRoomMemo
from solver.placement.landing import LandingOrder
from solver.placement.plan import NodeAssignment, Refusal
from solver.placement.problem import ActionInfo, EnvInfo, Item, Problem

SATURATED: int
RUN_LIMIT: int
ACTION_LIMIT: int
CAP: int

# (cluster, each container's pool, each container's node)
Found = tuple[int, list[int], list[int]]

def name_id(name: str) -> int: ...
def name_of(k: int) -> str: ...
def names_known() -> int: ...
def sharing_lists(
    set_start: np.ndarray, set_pools: np.ndarray, pool_start: np.ndarray, pool_sets: np.ndarray
) -> tuple[np.ndarray, np.ndarray]: ...
def earlier_sharing(members: np.ndarray, start: np.ndarray, sharing: np.ndarray) -> np.ndarray: ...

class Rows:
    def __init__(self, dims: int, clusters: int) -> None: ...
    def fits(self, dims: int, clusters: int) -> bool: ...

class Fleet:
    dims: int
    pools: int
    clusters: int
    queues: int
    names: int
    rows: Rows
    def __init__(
        self,
        problem: Problem,
        rows: Rows,
        is_device: Callable[[str], bool],
        is_whole_nvidia: Callable[[str], bool],
    ) -> None: ...
    def fits_base_room(self, request: np.ndarray, pools: Sequence[int]) -> bool: ...

class RoomLedger:
    fleet: Fleet
    first_fit: bool
    free_rows: np.ndarray
    opened_rows: np.ndarray
    max_free: np.ndarray
    room_returns: np.ndarray
    cluster_used: np.ndarray
    loads: np.ndarray
    kind_free: np.ndarray
    untyped_on: np.ndarray
    held: np.ndarray
    untyped_landed: np.ndarray
    admitted: np.ndarray
    env_started: np.ndarray
    no_fit: dict[Any, np.ndarray]
    landing: LandingOrder
    def __init__(
        self,
        fleet: Fleet,
        first_fit: bool,
        free_rows: np.ndarray,
        opened_rows: np.ndarray,
        cluster_used: np.ndarray,
        kind_free: np.ndarray,
        held: np.ndarray,
        landing: LandingOrder,
        no_fit_memory: int,
    ) -> None: ...
    def fork(self, landing: LandingOrder | None = None) -> RoomLedger: ...
    def refusal(
        self,
        queue: int,
        run: str,
        runs: set[str],
        demand: ResourceVector,
        device_caps: bool = True,
    ) -> tuple[int, ...] | None: ...
    def cap_refusal(
        self, queue: int, demand: ResourceVector, device_caps: bool = True
    ) -> tuple[int, ...] | None: ...
    def untyped_landed_on(self, queue: int, device: str) -> int: ...
    def fleet_may_hold(self, items: list[Item]) -> bool: ...
    def find_placement(
        self, queue: int, items: list[Item], demand: ResourceVector
    ) -> Found | None: ...
    def best_placement(
        self, queue: int, items: list[Item], demand: ResourceVector
    ) -> Found | None: ...
    def admit(
        self,
        queue: int,
        run: str,
        runs: set[str],
        items: list[Item],
        demand: ResourceVector,
        spots: Sequence[tuple[int, int]] | None,
        env: int | None,
        take: bool,
    ) -> None: ...
    def charge(self, queue: int, demand: ResourceVector, sign: int) -> None: ...
    def land(self, queue: int, items: list[Item], pools: Sequence[int], sign: int) -> None: ...
    def take_room(
        self,
        items: list[Item],
        pools: Sequence[int],
        nodes: Sequence[int],
        sign: int,
        refresh: bool,
    ) -> None: ...
    def hold(
        self, items: list[Item], pools: Sequence[int], nodes: Sequence[int], sign: int
    ) -> None: ...
    def refresh(self, pools: Sequence[int], clusters: Sequence[int]) -> None: ...
    def walk_line(
        self,
        actions: Sequence[ActionInfo],
        envs: Sequence[EnvInfo],
        runs_of: Sequence[set[str]],
        failures: Container[int],
        over_depth: Container[int],
        outcome: PassVerdicts,
        words: PassWords,
        empty: ResourceVector,
    ) -> list[tuple[ActionInfo, Found | None]]: ...
    def walk_decided(
        self,
        actions: Sequence[ActionInfo],
        start: int,
        stop: int,
        envs: Sequence[EnvInfo],
        runs_of: Sequence[set[str]],
        members: Container[int],
        refusals: dict[int, Refusal],
        heads: dict[int, int],
        shapes: NoRoomMemo,
        words: PassWords,
        empty: ResourceVector,
        out_of_time: Refusal | None,
        kept: Container[int] | None = None,
    ) -> tuple[int, list[tuple[ActionInfo, Found | None]]]: ...

class Packer:
    placed: int
    def __init__(self, ledger: RoomLedger, units: Sequence[Unit]) -> None: ...
    def pack(
        self, room_of: dict[tuple[int, str], int], keep: bool
    ) -> list[NodeAssignment | tuple[int, tuple[tuple[int, int], ...]]] | None: ...
