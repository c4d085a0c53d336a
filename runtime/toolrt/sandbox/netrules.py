"""`network:` by name: which host names and ports a sandboxed process may reach through toolrt's proxy.

An entry is a host name (`pypi.org`), a wildcard for its subdomains (`*.npmjs.org`, not `npmjs.org`
itself), or an IP address, with an optional port (`github.com:443`, `host:*` for any); without one, the
web's ports 80 and 443. A preset's name (`pypi`, `npm`, `crates`, `go`, `github`) stands for its
entries. The host's list (or the locked file's) may widen; a project's or tool's list narrows: a
connection must match an entry of every list, and no `deny` entry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..addresses import ip_literal

__all__ = ["PRESETS", "NetworkRules", "Verdict", "entry_problem", "expand"]

PRESETS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "pypi": ("pypi.org", "files.pythonhosted.org"),
        "npm": ("registry.npmjs.org", "*.npmjs.org", "registry.yarnpkg.com"),
        "crates": ("crates.io", "index.crates.io", "static.crates.io", "static.rust-lang.org"),
        "go": ("proxy.golang.org", "sum.golang.org", "storage.googleapis.com"),
        "github": (
            "github.com",
            "api.github.com",
            "codeload.github.com",
            "objects.githubusercontent.com",
            "raw.githubusercontent.com",
        ),
    }
)
"""The everyday install commands' hosts, by ecosystem (`toolrt init` writes them as comments)."""

_WEB_PORTS = (80, 443)


@dataclass(frozen=True, slots=True)
class _Entry:
    """One entry of a `network:` list: a host name, wildcard or IP address, and the port."""

    name: str
    """Lower case, no trailing dot; `*.x` for the subdomains of x."""
    port: int | None
    """None: 80 and 443; 0: any."""
    text: str

    def names(self, host: str) -> bool:
        return host.endswith(self.name[1:]) if self.name.startswith("*.") else host == self.name

    def matches(self, host: str, port: int) -> bool:
        if self.port is None and port not in _WEB_PORTS or self.port not in (None, 0, port):
            return False
        return self.names(host)


def _parse(text: str) -> _Entry:
    raw = text.strip().lower().rstrip(".")
    name, port = raw, None
    if raw.startswith("["):  # [::1]:443
        name, _, rest = raw[1:].partition("]")
        port = _port(rest.removeprefix(":")) if rest else None
    elif raw.count(":") == 1:
        name, _, tail = raw.partition(":")
        port = _port(tail)
    literal = ip_literal(name)
    return _Entry(str(literal) if literal is not None else name, port, text)


def _port(text: str) -> int:
    if text == "*":
        return 0
    number = int(text)
    if not 0 < number < 65536:
        raise ValueError(text)
    return number


def entry_problem(text: str) -> str | None:
    """Why `text` is no usable entry (or preset name), or None."""
    if text in PRESETS:
        return None
    try:
        entry = _parse(text)
    except ValueError:
        return f"'{text}' has no valid port (1-65535, or *)"
    bare = entry.name.removeprefix("*.")
    if not bare or "*" in bare or "/" in bare or " " in bare:
        return f"'{text}' is not a host name, '*.' and a domain, or an IP address (with an optional :port)"
    return None


def expand(entries: Iterable[str]) -> tuple[str, ...]:
    """The entries with each preset's name replaced by its hosts."""
    found: list[str] = []
    for entry in entries:
        found.extend(PRESETS.get(entry, (entry,)))
    return tuple(dict.fromkeys(found))


@dataclass(frozen=True, slots=True)
class Verdict:
    """A proxy's decision about one destination."""

    allowed: bool
    rule: str
    """The entry that decided (`pypi.org`, `deny: *.evil.test`), or why none did."""
    named: bool = False
    """Allowed by an exact name or address the host's list gives, not a wildcard: only then may it reach a
    private, loopback or link-local address."""


@dataclass(frozen=True, slots=True)
class NetworkRules:
    """The allow lists (every one must match: the host's first, then each narrowing layer) and the deny list."""

    allow: tuple[tuple[str, ...], ...]
    deny: tuple[str, ...] = ()

    def narrowed(self, allow: tuple[str, ...] | None, deny: tuple[str, ...] | None) -> NetworkRules:
        return NetworkRules(
            self.allow + ((expand(allow),) if allow is not None else ()),
            tuple(dict.fromkeys((*self.deny, *expand(deny or ())))),
        )

    def decide(self, host: str, port: int) -> Verdict:
        """Whether `host:port` (a name as the process gave it, or an address) may be connected to."""
        name = host.strip("[]").rstrip(".").lower()
        literal = ip_literal(name)
        name = str(literal) if literal is not None else name
        for text in self.deny:
            if _parse(text).matches(name, port):
                return Verdict(False, f"deny: {text}")
        if not self.allow:
            return Verdict(False, "no allow list")
        named = False
        for index, layer in enumerate(self.allow):
            hit = next((e for e in map(_parse, layer) if e.matches(name, port)), None)
            if hit is None:
                why = "not on that port" if any(e.names(name) for e in map(_parse, layer)) else "not in the allow list"
                return Verdict(False, f"{why} ({'host' if index == 0 else 'narrowed'} list)")
            if index == 0:
                named = not hit.name.startswith("*.")
        return Verdict(True, "allow", named)
