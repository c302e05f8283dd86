"""Explanations: why an action failed, why it waits, or where it runs (`solver.explain.action`).

`GET /actions/{id}/explanation` is answered by api.explanation_cache: at most one solve per
action per tick, in the service's explanation worker.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from api.deps import ActionId, PrincipalDep, TickerDep
from api.errors import error_responses
from api.explanation_cache import ActionExplanations
from api.schemas.actions import ActionExplanation

router = APIRouter(tags=["explanations"])


async def get_explanations(request: Request) -> ActionExplanations:
    return request.app.state.explanations


@router.get(
    "/actions/{action_id}/explanation",
    response_model_exclude_none=True,
    responses=error_responses(404, 409),
)
async def get_explanation(
    action_id: ActionId,
    explanations: Annotated[ActionExplanations, Depends(get_explanations)],
    ticker: TickerDep,
    _: PrincipalDep,
) -> ActionExplanation:
    """Why the action failed, why it waits (a minimal set of limits that keep it out, and
    what would let it in, with when it is expected to start), or where it runs.

    Judged against the store as it is now and the last tick's decisions; the answer is
    kept until the next tick, so asking again in the same tick solves nothing."""
    explanation = await explanations.get(action_id)
    return ActionExplanation.of(explanation, ticker.forecast(action_id))
