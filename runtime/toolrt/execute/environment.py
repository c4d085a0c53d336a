"""The environment a tool process sees: an allow-list over the host's, never its secrets by accident.

A tool's YAML lists the variables it needs (`env: {allow: [...], set: {...}}`); everything else in
the host environment (API keys, cloud credentials, tokens) stays out of the child. Wildcards make
lists short (`LC_*`), and because a wildcard can sweep in more than its author meant, names that look
like secrets are dropped unless the author wrote that exact name.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from functools import lru_cache

from ..config.settings import is_secret_name

__all__ = ["DEFAULT_ENV_ALLOW", "build_env"]

DEFAULT_ENV_ALLOW: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "TMPDIR",
    "TZ",
)
"""What a process gets when its tool declares nothing. `PWD` is left out on purpose: it would name
the host's directory, not the child's `cwd`, and shells set it themselves."""


@lru_cache(maxsize=256)
def _compile(allow: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    exact = frozenset(a for a in allow if not a.endswith("*"))
    prefixes = tuple(a[:-1] for a in allow if a.endswith("*"))
    return exact, prefixes


def build_env(
    allow: Sequence[str] = DEFAULT_ENV_ALLOW,
    *,
    set: Mapping[str, str] | None = None,  # named after the YAML key `env.set`
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The child environment: the allowed variables of `source` (default: `os.environ`), then `set`.

    An `allow` entry is a name (`HOME`) or a prefix ending in `*` (`LC_*`; `*` alone means every
    name). A name matched only by a prefix is dropped when it looks like a secret (`GITHUB_TOKEN`
    under `GITHUB_*`); a name listed exactly passes, since the author asked for it by name. Values
    in `set` are added last and win over inherited ones.
    """
    exact, prefixes = _compile(tuple(allow))
    env: dict[str, str] = {}
    for name, value in (os.environ if source is None else source).items():
        if name in exact or (prefixes and name.startswith(prefixes) and not is_secret_name(name)):
            env[name] = value
    if set:
        env.update(set)
    return env
