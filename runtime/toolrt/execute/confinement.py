"""What a sandbox plan lets a process write, in the attribution journal's terms (`toolrt.attribution`)."""

from __future__ import annotations

import os

from ..attribution import Confinement
from ..sandbox.plan import SandboxPlan

__all__ = ["confinement"]


def confinement(plan: SandboxPlan | None) -> Confinement | None:
    """The writable set of `plan` less its read-only mounts and masked files; None without a sandbox
    (the process could write anything its user can)."""
    if plan is None:
        return None
    # An absent protected name the overlay covered could not be made by the process either: the person
    # creating `tools.d/` while a call runs makes it theirs.
    covered = tuple(os.path.join(plan.root, name) for name in plan.covered) if plan.root else ()
    hidden = (*plan.read_only, *plan.masks.files, *plan.masks.directories, *covered)
    return Confinement(tuple(plan.writable), tuple(dict.fromkeys(hidden)))
