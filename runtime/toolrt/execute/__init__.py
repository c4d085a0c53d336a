"""Running tool processes: the environment they get and the runner that contains them."""

from __future__ import annotations

from .environment import DEFAULT_ENV_ALLOW, SECRET_PATTERNS, build_env, is_secret_name
from .process import CHUNK_SIZE, ProcessOutcome, run_process

__all__ = [
    "CHUNK_SIZE",
    "DEFAULT_ENV_ALLOW",
    "SECRET_PATTERNS",
    "ProcessOutcome",
    "build_env",
    "is_secret_name",
    "run_process",
]
