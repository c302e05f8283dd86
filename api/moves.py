"""Moving waiting actions between queues: the `--where` filter and the destination's check.

A filter is a tiny, strict grammar over an action's requests, summed over its containers:

    FILTER := CLAUSE ("," CLAUSE)*          every clause must hold
    CLAUSE := NAME OP QUANTITY              gpu>=8   memory>64Gi   cpu<=4
    NAME   := gpu (accelerators of any type) | cpu | memory | another resource's name
    OP     := >= | <= | > | < | = | !=

At most MAX_CLAUSES clauses and MAX_FILTER_LENGTH characters; anything else is
INVALID_ARGUMENT naming the clause. An action in a reusable environment requests nothing.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from models.errors import ErrorCode, FailedPrecondition, InvalidInput
from models.limits import MAX_ACCELERATORS
from models.quantity import parse_quantity
from models.snapshot import Action, Snapshot
from solver.placement.failfast import fail_fast
from solver.placement.problem import compile_snapshot

MAX_FILTER_LENGTH = 200
MAX_CLAUSES = 8
_GPU = "gpu"
_CLAUSE = re.compile(
    r"^\s*([A-Za-z][A-Za-z0-9._/-]{0,62})\s*(>=|<=|!=|>|<|=)\s*([0-9.][0-9A-Za-z.+-]{0,39})\s*$"
)
_OPERATORS: dict[str, Callable[[int, int], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "=": operator.eq,
    "!=": operator.ne,
}


@dataclass(frozen=True)
class _Clause:
    name: str
    compare: Callable[[int, int], bool]
    amount: int

    def holds(self, action: Action) -> bool:
        if self.name == _GPU:
            total = sum(c.gpu.count for c in action.containers if c.gpu is not None)
        else:
            total = sum(c.resources.get(self.name, 0) for c in action.containers)
        return self.compare(total, self.amount)


def parse_filter(text: str) -> Callable[[Action], bool]:
    """The predicate `text` spells; raises InvalidInput (field `where`) for anything else."""
    if len(text) > MAX_FILTER_LENGTH:
        raise InvalidInput(f"where: longer than {MAX_FILTER_LENGTH} characters", field="where")
    parts = text.split(",")
    if len(parts) > MAX_CLAUSES:
        raise InvalidInput(f"where: more than {MAX_CLAUSES} clauses", field="where")
    clauses = []
    for part in parts:
        match = _CLAUSE.match(part)
        if match is None:
            raise InvalidInput(
                f"where: {part.strip()!r} is not NAME OP QUANTITY (e.g. gpu>=8, memory>64Gi)",
                field="where",
            )
        name, op, quantity = match.groups()
        name = name.lower() if name.lower() in (_GPU, "cpu", "memory") else name
        if name == _GPU:
            if not quantity.isdigit() or int(quantity) > MAX_ACCELERATORS:
                raise InvalidInput(
                    f"where: {part.strip()!r}: gpu counts whole accelerators", field="where"
                )
            amount = int(quantity)
        else:
            amount = parse_quantity(name, quantity, "where")
        clauses.append(_Clause(name, _OPERATORS[op], amount))
    return lambda action: all(clause.holds(action) for clause in clauses)


def refuse_infeasible(destination: Snapshot) -> None:
    """Refuse a move whose destination could never run one of the moved actions: its caps
    (on an empty queue) or the clusters it routes to cannot hold the request."""
    problem = compile_snapshot(destination)
    for _, failure in sorted(fail_fast(problem).items()):
        if failure.code is ErrorCode.INFEASIBLE:
            raise FailedPrecondition(
                f"cannot move to queue {destination.queues[0].name}: {failure.message};"
                " nothing was moved",
                field="to",
            )
