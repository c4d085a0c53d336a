"""Running tool processes: the environment they get and the runner that contains them."""

from __future__ import annotations

from .environment import DEFAULT_ENV_ALLOW, build_env
from .process import CHUNK_SIZE, ProcessOutcome, run_process

__all__ = [
    "CHUNK_SIZE",
    "DEFAULT_ENV_ALLOW",
    "ProcessOutcome",
    "build_env",
    "run_process",
]
