"""Organization settings (the default GPU type for untyped requests)."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import PrincipalDep, StoreDep
from api.errors import error_responses
from models.snapshot import Settings

router = APIRouter(prefix="/settings", tags=["settings"])


@router.get("")
def get_settings(store: StoreDep, _: PrincipalDep) -> Settings:
    return store.get_settings()


@router.put("", responses=error_responses(403))
def put_settings(body: Settings, store: StoreDep, who: PrincipalDep) -> Settings:
    """Applies from the next tick on."""
    who.require_admin("change organization settings")
    store.put_settings(body)
    return body
