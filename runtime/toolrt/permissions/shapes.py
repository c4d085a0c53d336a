"""What the requests of toolrt's own permissions look like, and rule patterns that can never match one.

A rule whose pattern no request of its permission can take is silent: it never decides, and every
check of it by hand (or by a `tests:` entry that names the same impossible pattern) agrees with the
rule rather than with the calls. `never_matches` names such a pattern and the one to write instead.

- path permissions (`permissions.paths`) ask normalised paths: no `./` at the start, no `//`, `/./`
  or `/../` inside, no `/` at the end;
- `external_directory` asks `DIR/*`: a pattern must end with a wildcard;
- `webfetch` asks the URL as the model gave it, and only `http://` and `https://` URLs run.
"""

from __future__ import annotations

from .paths import PATH_PERMISSIONS

__all__ = ["never_matches"]

_SCHEMES = ("http://", "https://")


def _literal_head(pattern: str) -> str:
    for index, char in enumerate(pattern):
        if char in "*?":
            return pattern[:index]
    return pattern


def _path_fix(pattern: str) -> str:
    """`pattern` without what no normalised path holds (`..` inside is left: only a person can say)."""
    fixed = pattern
    while fixed.startswith("./"):
        fixed = fixed[2:]
    for odd in ("//", "/./"):
        while odd in fixed:
            fixed = fixed.replace(odd, "/")
    if fixed.endswith("/."):
        fixed = fixed[:-2] or "/"
    if fixed.endswith("/") and fixed != "/":
        fixed = fixed.rstrip("/") + "/*"
    return fixed


def never_matches(permission: str, pattern: str) -> str | None:
    """Why no request of `permission` can match `pattern` and the pattern to write; None when one can.

    Only built-in permissions are known; a project tool's own key asks what its templates render.
    """
    if permission == "webfetch":
        head = _literal_head(pattern)
        if any(head.startswith(scheme) or scheme.startswith(head) for scheme in _SCHEMES):
            return None
        bare = pattern.split("://", 1)[1] if "://" in pattern else pattern
        return (
            f'webfetch asks with the full http:// or https:// URL; write "https://{bare}" '
            f'(or "http*://{bare}" for both schemes)'
        )
    if permission not in PATH_PERMISSIONS or not pattern:
        return None
    if permission == "external_directory" and pattern[-1] not in "*?":
        return (
            "external_directory asks with the directory followed by /* (like /home/me/notes/*); "
            f'write "{pattern.rstrip("/")}/*"'
        )
    fixed = _path_fix(pattern)
    climbs = "/../" in pattern or pattern.endswith("/..")
    if fixed == pattern and not climbs:
        return None
    why = f"{permission} asks with normalised paths (no ./ at the start, no // or /../, no / at the end)"
    return f"{why}; write the path without them" if climbs else f'{why}; write "{fixed}"'
