"""What a sandboxed process may do: the policy, how layers of config combine, and per-call widening.

Layers, loosest first: the built-in default (`workspace-write`, network on), the host (CLI,
environment, user settings file), then the project's `toolrt.yaml` and each tool file, which may
only tighten. The locked file fixes whatever it names: nothing after it loosens that, and the host
cannot loosen it either. Modes order `read-only` < `workspace-write` < `off`; `network: false` <
`true`; a `writable` path widens only what the layer above it allowed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # both are read only where a layer names credentials or hosts (`toolrt validate` rarely)
    from .credentials import Credential
    from .netrules import NetworkRules

__all__ = ["MODES", "Mode", "SandboxLayer", "SandboxPolicy", "loosening", "merge_tighter"]

Mode = Literal["read-only", "workspace-write", "off"]
MODES: tuple[Mode, ...] = ("read-only", "workspace-write", "off")
"""Tightest first."""


@dataclass(frozen=True, slots=True)
class SandboxLayer:
    """One config layer's `sandbox:` block: only the keys it sets are not None."""

    mode: Mode | None = None
    network: bool | None = None
    writable: tuple[Path, ...] | None = None
    """Absolute, normalised paths."""
    required: bool | None = None
    """Locked file only: refuse to run process tools when no kernel sandbox is available."""
    sockets: tuple[str, ...] | None = None
    """Host only: pathname UNIX sockets a tool needs (`$SSH_AUTH_SOCK`), absolute and normalised."""
    source: str = ""
    allow: tuple[str, ...] | None = None
    """`network: {allow: [...]}`: the host names (and presets) reachable through toolrt's proxy; `network`
    is then False (no route of the process's own)."""
    deny: tuple[str, ...] | None = None
    credentials: tuple[Credential, ...] = ()
    """Host only: the environment variables kept out of the sandbox or masked (see `credentials`)."""
    """Where the block came from, for messages (`toolrt.yaml:12`, `TOOLRT_SANDBOX__MODE`)."""


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """The effective limits of one process (or of every process of a snapshot, before per-call widening)."""

    mode: Mode = "workspace-write"
    network: bool = True
    writable: tuple[Path, ...] = ()
    """Directories writable besides the project root, temp and tool-output (in `workspace-write`),
    or besides nothing (in `read-only`, where only these and the usual devices are writable)."""
    protected: tuple[Path, ...] = ()
    """Paths inside the root that stay read-only in the sandbox where a mount namespace allows it."""
    essential: tuple[Path, ...] = ()
    """The protected paths the other walls rest on (the attribution journal, the environment toolrt runs
    from, the locked file): read-only even for a call whose `protected` ask the person approved."""
    required: bool = False
    ceiling: Mode = "off"
    """The loosest mode the locked file (or host) permits; per-call widening never goes past it."""
    external_writable: bool = True
    """False when the locked file fixed `writable`: an allowed external_directory does not widen it."""
    sockets: tuple[str, ...] = ()
    """The host's socket allow-list: the UNIX sockets a sandboxed process may connect to (see
    `supervisor`); empty, no process may make a UNIX socket at all."""
    network_rules: NetworkRules | None = None
    """With `network` False: the names reachable through toolrt's proxy (see `proxy`); None: none."""
    credentials: tuple[Credential, ...] = ()
    """The host's credentials list (see `credentials`)."""
    _hash: int = field(default=0, init=False, repr=False, compare=False)
    """The hash, once computed: each call's plan looks its policy up in a few caches, and hashing a
    policy hashes every protected path (dozens) each time."""

    def __hash__(self) -> int:
        if not self._hash:
            values = tuple(getattr(self, f.name) for f in fields(self) if f.compare)
            object.__setattr__(self, "_hash", hash(values) or 1)
        return self._hash

    def widened_for_call(self, directories: tuple[Path, ...]) -> SandboxPolicy:
        """This policy with `directories` writable too (an allowed `external_directory` request),
        unless the locked file fixed the writable set or the mode is read-only."""
        extra = tuple(d for d in directories if d not in self.writable)
        if not extra or not self.external_writable or self.mode != "workspace-write":
            return self
        return replace(self, writable=self.writable + extra)

    def tightened(self, layer: SandboxLayer, *, root: Path) -> SandboxPolicy:
        """Apply a tighten-only layer (project or tool file); call `loosening` first to report misuse."""
        mode = self.mode if layer.mode is None else min(self.mode, layer.mode, key=MODES.index)
        network = self.network and (layer.network if layer.network is not None else True)
        rules = self.network_rules
        if layer.network is False and layer.allow is None:
            rules = None
        elif layer.allow is not None or layer.deny is not None:
            if self.network:  # names narrow an open network
                from .netrules import NetworkRules

                rules = NetworkRules(()).narrowed(layer.allow, layer.deny)
            elif rules is not None:
                rules = rules.narrowed(layer.allow, layer.deny)
        writable = self.writable
        if layer.writable is not None:
            inside = tuple(p for p in layer.writable if _within(p, root))
            if self.mode == "read-only" and mode == "read-only":
                writable = tuple(p for p in inside if any(_within(p, w) for w in self.writable))
            elif mode == "read-only":
                writable = inside
        return replace(self, mode=mode, network=network, writable=writable, network_rules=rules)


def loosening(policy: SandboxPolicy, layer: SandboxLayer, *, root: Path) -> list[tuple[str, str]]:
    """The keys of a tighten-only layer that would loosen `policy`: (key, message) pairs."""
    found: list[tuple[str, str]] = []
    if layer.mode is not None and MODES.index(layer.mode) > MODES.index(policy.mode):
        found.append(
            (
                "mode",
                f"sandbox mode '{layer.mode}' would loosen '{policy.mode}': a project may only tighten the "
                "sandbox; set a looser mode on the host (--sandbox, TOOLRT_SANDBOX__MODE, the user settings file)",
            )
        )
    if layer.allow is not None and not policy.network and policy.network_rules is None:
        found.append(
            (
                "network",
                "sandbox network names hosts, but the network is off: a project may only narrow the host's "
                "list; name the hosts on the host (sandbox.network.allow in the user settings file)",
            )
        )
    if layer.network is True and not policy.network:
        found.append(
            (
                "network",
                "sandbox network: true would turn the network back on: a project may only turn it off; "
                "enable it on the host (TOOLRT_SANDBOX__NETWORK=true, the user settings file)",
            )
        )
    for index, path in enumerate(layer.writable or ()):
        if not _within(path, root):
            found.append(
                (
                    f"writable/{index}",
                    f"sandbox writable path '{path}' is outside the project root: a project may only name "
                    "directories inside it; declare outside ones on the host (TOOLRT_SANDBOX__WRITABLE, "
                    "the user settings file)",
                )
            )
        elif not path.is_dir():
            found.append((f"writable/{index}", f"sandbox writable path '{path}' does not exist or is not a directory"))
    return found


def merge_tighter(host: SandboxLayer, locked: SandboxLayer | None) -> tuple[SandboxPolicy, list[str]]:
    """The policy before the project's layer: the host's choices within what the locked file fixes.

    Returns the policy and warnings for host values the locked file overrode."""
    warnings: list[str] = []
    mode = _mode_within(host, locked, warnings)
    network, rules = _network_within(host, locked, warnings)
    writable, fixed_writable = _writable_within(host, locked, warnings)
    required = bool(locked is not None and locked.required)
    if required and mode == "off":
        mode = "workspace-write"
    policy = SandboxPolicy(
        mode=mode,
        network=network,
        writable=tuple(writable),
        required=required,
        ceiling=locked.mode if locked is not None and locked.mode is not None else "off",
        external_writable=not fixed_writable,
        sockets=host.sockets or (),
        network_rules=rules if not network else None,
        credentials=host.credentials,
    )
    return policy, warnings


def _mode_within(host: SandboxLayer, locked: SandboxLayer | None, warnings: list[str]) -> Mode:
    """The host's mode (workspace-write when unset) at most as loose as the locked file's, which an unset one takes."""
    mode: Mode = host.mode or "workspace-write"
    if locked is None or locked.mode is None:
        return mode
    if MODES.index(mode) > MODES.index(locked.mode):
        if host.mode is not None:
            warnings.append(f"{host.source}: sandbox mode '{mode}' ignored: the locked file fixes '{locked.mode}'")
        return locked.mode
    return locked.mode if host.mode is None else mode


def _network_within(
    host: SandboxLayer, locked: SandboxLayer | None, warnings: list[str]
) -> tuple[bool, NetworkRules | None]:
    """Whether the network is on, and the names reachable through the proxy, within what the locked file fixes."""
    network = True if host.network is None else host.network
    rules = _names(host)
    if locked is None or locked.network is None:
        return network, rules
    if network and not locked.network and host.network is True:
        warnings.append(f"{host.source}: sandbox network ignored: the locked file turns the network off")
    fixed = _names(locked)
    if fixed is not None:  # the locked file's names widen the host's (or fix them when it had none)
        from .netrules import NetworkRules

        rules = NetworkRules(
            ((*(rules.allow[0] if rules is not None else ()), *fixed.allow[0]),),
            tuple(dict.fromkeys((*(rules.deny if rules is not None else ()), *fixed.deny))),
        )
    elif not locked.network:
        rules = None
    return (network and locked.network if host.network is not None else locked.network), rules


def _writable_within(
    host: SandboxLayer, locked: SandboxLayer | None, warnings: list[str]
) -> tuple[tuple[Path, ...], bool]:
    """The writable paths (the locked file's when it fixes them) and whether it does."""
    if locked is None or locked.writable is None:
        return host.writable or (), False
    if host.writable and set(host.writable) - set(locked.writable):
        warnings.append(f"{host.source}: sandbox writable paths ignored: the locked file fixes them")
    return locked.writable, True


def _names(layer: SandboxLayer) -> NetworkRules | None:
    """A host or locked layer's `network: {allow, deny}` as the first (widest) list, or None."""
    if layer.allow is None:
        return None
    from .netrules import NetworkRules

    return NetworkRules(()).narrowed(layer.allow, layer.deny)


def _within(path: Path, root: Path) -> bool:
    path = Path(os.path.normpath(path))
    return path == root or root in path.parents
