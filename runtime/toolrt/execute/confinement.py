"""What a sandbox plan lets a process write, in the attribution journal's terms (`toolrt.attribution`)."""

from __future__ import annotations

from ..attribution import Confinement
from ..sandbox.plan import SandboxPlan

__all__ = ["confinement"]


def confinement(plan: SandboxPlan | None) -> Confinement | None:
    """The writable set of `plan` less its read-only mounts and masked files; None without a sandbox
    (the process could write anything its user can)."""
    if plan is None:
        return None
    hidden = (*plan.read_only, *plan.masks.files, *plan.masks.directories)
    return Confinement(tuple(plan.writable), tuple(dict.fromkeys(hidden)))
