"""The sandbox policy from its layers: the host, the project and tool files, the locked file.

The host's values are host-only settings of `toolrt.config.settings` (`--sandbox`, `TOOLRT_SANDBOX__MODE`,
`__NETWORK`, `__WRITABLE`, the user settings file's `sandbox:`) and may loosen (`mode: off`, a
writable package cache); the project's `toolrt.yaml` and tool files may only tighten, and a value
that tries to loosen is a located config problem; the locked file fixes what it names.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..beneath import is_within
from ..config.document import Document
from ..errors import Problem, ToolFailure
from .masks import NO_MASKS, DenyTest, Masks, denied_paths
from .policy import MODES, Mode, SandboxLayer, SandboxPolicy, loosening, merge_tighter
from .support import Support, detect_support

if TYPE_CHECKING:
    from ..attribution import Journal
    from .plan import SandboxPlan

__all__ = [
    "MAX_PROTECTED_MOUNTS",
    "block_layer",
    "build_policy",
    "call_plan",
    "concrete_protected",
    "host_layer",
    "sandbox_problems",
    "sandbox_status",
    "tool_policy",
]

MAX_PROTECTED_MOUNTS = 64
"""At most this many protected paths become read-only mounts (each costs a mount when the namespace is made)."""


def host_layer(
    mode: str | None,
    network: object,
    writable: tuple[Path, ...] | None,
    *,
    source: str,
    problems: list[Problem],
    sockets: tuple[Path, ...] | None = None,
    journal: Journal | None = None,
    credentials: Iterable[object] | None = None,
) -> SandboxLayer:
    """The host's sandbox settings (`toolrt.config.settings.SandboxSettings`, resolved from the command line, the
    environment and the user settings file) as a layer; a writable path that is no directory is an error.

    Each listed socket is pinned here (`supervisor.pin`), when toolrt reads its settings and before any
    tool ran; one that is no socket now (or is reached through a symlink) is reported and pinned when
    it first is one; one a process a tool started put there (per the attribution `journal`) is reported
    and never pinned by this process."""
    paths = tuple(Path(os.path.normpath(p)) for p in writable) if writable is not None else None
    for path in paths or ():
        if not path.is_absolute() or not path.is_dir():
            problems.append(
                Problem(source, 0, 0, "", f"sandbox.writable names '{path}', which is not an existing directory")
            )
    listed = tuple(dict.fromkeys(os.path.normpath(p) for p in sockets or ()))
    if listed:  # the supervisor (its system calls, socket) is imported by a host that lists sockets
        from .supervisor import NOT_A_SOCKET, pin, refusal

        pinned = {path for path, _, _ in pin((p for p in listed if os.path.isabs(p)), journal)}
        for named in listed:
            if named not in pinned:
                why = refusal(named, journal) or NOT_A_SOCKET
                problems.append(Problem(source, 0, 0, "", f"sandbox.sockets names '{named}', which {why}", "warning"))
    known: Mode | None = next((m for m in MODES if m == mode), None)
    if credentials:  # the credentials module (secrets, temp files) is imported by a host that lists them
        from .credentials import Credential
    allow, deny = _names(getattr(network, "allow", None), getattr(network, "deny", None), source, problems)
    return SandboxLayer(
        known,
        network if isinstance(network, bool) else (False if allow is not None else None),
        paths,
        None,
        tuple(p for p in listed if os.path.isabs(p)),
        source,
        allow=allow,
        deny=deny,
        credentials=tuple(
            Credential(
                str(getattr(c, "env", "") or ""),
                "mask" if getattr(c, "action", "deny") == "mask" else "deny",
                str(getattr(c, "host", "")),
                str(getattr(c, "header", "Authorization")),
                _resolved(getattr(c, "file", None)),
            )
            for c in credentials or ()
        ),
    )


def _resolved(file: object) -> str:
    """A credential file's path, `~` expanded and links resolved (the host named it); "" for none."""
    return os.path.realpath(os.path.expanduser(str(file))) if file else ""


def _names(
    allow: object, deny: object, source: str, problems: list[Problem]
) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """`network: {allow, deny}` as tuples of valid entries; each invalid one is reported and left out."""
    found: list[tuple[str, ...] | None] = []
    for key, entries in (("allow", allow), ("deny", deny)):
        if entries is None:
            found.append(None)
            continue
        from .netrules import entry_problem  # (a host that names no hosts imports no address parsing)

        kept = []
        for entry in map(str, entries):  # type: ignore[call-overload]
            problem = entry_problem(entry)
            if problem is None:
                kept.append(entry)
            else:
                problems.append(Problem(source, 0, 0, "", f"sandbox.network.{key}: {problem}"))
        found.append(tuple(kept))
    return found[0], found[1]


def block_layer(
    document: Document, pointer: str, *, base: Path, problems: list[Problem] | None = None
) -> SandboxLayer | None:
    """The `sandbox:` block at `pointer` of a schema-valid document; relative paths are against `base`;
    an invalid `network:` entry is reported in `problems` and left out."""
    problems = problems if problems is not None else []
    data: Any = document.data or {}
    for part in (p for p in pointer.split("/") if p):
        data = data.get(part) if isinstance(data, Mapping) else None
    if not isinstance(data, Mapping):
        return None
    writable = data.get("writable")
    mode = data.get("mode")
    network = data.get("network")
    names = network if isinstance(network, Mapping) else {}
    allow, deny = _names(names.get("allow"), names.get("deny"), document.source(pointer), problems)
    return SandboxLayer(
        mode="off" if mode is False else mode,  # YAML 1.1 reads an unquoted `off` as false
        network=False if names else network,
        allow=allow,
        deny=deny,
        writable=(
            tuple(Path(os.path.normpath(base / Path(p).expanduser())) for p in writable)
            if writable is not None
            else None
        ),
        required=data.get("required"),
        source=document.source(pointer),
    )


def build_policy(
    *,
    root: Path,
    project: Document | None,
    locked: Document | None,
    host: SandboxLayer,
    problems: list[Problem],
) -> SandboxPolicy:
    """The snapshot's sandbox policy: host within the locked file, then the project, tighten-only."""
    locked_layer = block_layer(locked, "/sandbox", base=root, problems=problems) if locked is not None else None
    policy, warnings = merge_tighter(host, locked_layer)
    problems.extend(Problem("<settings>", 0, 0, "", w, "warning") for w in warnings)
    if project is not None:
        layer = block_layer(project, "/sandbox", base=root, problems=problems)
        if layer is not None:
            problems.extend(_located(project, "/sandbox", loosening(policy, layer, root=root)))
            policy = policy.tightened(layer, root=root)
    return policy


def concrete_protected(
    root: Path, patterns: Iterable[str], files: Iterable[Path], *, first: Iterable[Path] = ()
) -> tuple[Path, ...]:
    """The protected list (`toolrt.permissions.protected` patterns, and files protected by identity) as
    paths a read-only mount can cover: `./x` and `/x` as given, a bare name (`.git`) at the project
    root. Wildcard patterns and names deeper in the tree are left to the `protected` permission, which
    asks for every write route the analyzer sees; the kernel covers what can be named up front.

    At most `MAX_PROTECTED_MOUNTS` paths: `first` (what the other walls rest on, such as the attribution
    journal) comes before the patterns, so no length of a project's `protected:` list can push it out."""
    found: list[Path] = [Path(os.path.normpath(f)) for f in first]
    for pattern in patterns:
        if any(c in pattern for c in "*?["):
            continue
        if pattern.startswith("/"):
            found.append(Path(os.path.normpath(pattern)))
        else:
            found.append(Path(os.path.normpath(root / pattern.removeprefix("./"))))
    found.extend(Path(os.path.normpath(f)) for f in files)
    return tuple(dict.fromkeys(found))[:MAX_PROTECTED_MOUNTS]


def tool_policy(
    base: SandboxPolicy, document: Document | None, *, root: Path, problems: list[Problem]
) -> SandboxPolicy | None:
    """A tool file's tightened policy, or None when the file has no `sandbox:` block."""
    if document is None:
        return None
    layer = block_layer(document, "/sandbox", base=root, problems=problems)
    if layer is None:
        return None
    problems.extend(_located(document, "/sandbox", loosening(base, layer, root=root)))
    return base.tightened(layer, root=root)


def call_plan(
    policy: SandboxPolicy,
    *,
    root: Path,
    output_dir: Path,
    granted: Iterable[tuple[str, str]] = (),
    support: Support | None = None,
    reads: DenyTest | None = None,
    journal: Journal | None = None,
) -> SandboxPlan | None:
    """The plan for one call: the policy widened by the call's allowed `external_directory` requests,
    with the files inside the root that `reads` (the call's `read` rules) deny masked. A protected path
    the person let this call write (an approved `protected` request naming it, or `*`/`dir/*` for files
    whose names come from what the command reads) is left writable for this call: the kernel keeps
    what the person did not approve, not what they did.

    Raises:
        ToolFailure: the locked file requires a sandbox and this machine has none; or the denied
            files cannot be masked here (too many, or no mount namespace): nothing runs unmasked.
    """
    from .plan import plan_sandbox  # what a process needs to start: not imported by a build

    directories = tuple(
        Path(pattern[:-2])
        for permission, pattern in granted
        if permission == "external_directory" and pattern.endswith("/*")
    )
    approved = [pattern for permission, pattern in granted if permission == "protected"]
    if approved and policy.protected:
        kept = tuple(
            path for path in policy.protected if path in policy.essential or not _approved(path, root, approved)
        )
        policy = dataclasses.replace(policy, protected=kept)
    support = support or detect_support()
    sandboxed = policy.mode != "off" and support.available
    masks = denied_paths(root, reads) if sandboxed else NO_MASKS
    secret_files: tuple[str, ...] = ()
    if sandboxed and policy.credentials:
        from .credentials import masked_files

        secret_files, placeholders = masked_files(policy.credentials)
    if secret_files:  # the host's credential files read as empty (as denied files do), or as placeholders
        masks = Masks(tuple(dict.fromkeys((*masks.files, *secret_files))), masks.directories, placeholders)
    plan = plan_sandbox(
        policy.widened_for_call(directories),
        support,
        root=root,
        output_dir=output_dir,
        masks=masks,
        granted=tuple(d for d in directories if d not in policy.writable),
        journal=journal,
    )
    if plan is None and policy.required:
        raise ToolFailure(
            f"This tool runs a process, and the locked file requires an OS sandbox, which is not available here: "
            f"{support.describe()}. Nothing was run."
        )
    return plan


def _approved(path: Path, root: Path, patterns: Iterable[str]) -> bool:
    """Whether an approved `protected` pattern (root-relative or absolute; `*` and `dir/*` for unnamed
    files) covers the protected `path`, or a path beneath it."""
    for pattern in patterns:
        if pattern.endswith("*"):
            base = Path(os.path.normpath(root / pattern[:-1].rstrip("/")))
            if is_within(path, base) or is_within(base, path):
                return True
            continue
        named = Path(os.path.normpath(root / pattern))
        if is_within(named, path):
            return True
    return False


def sandbox_status(policy: SandboxPolicy, support: Support | None = None) -> str:
    """One line for `toolrt validate` and `toolrt serve`: which sandbox the tools' processes run in."""
    if policy.mode == "off":
        return "off (a host setting turned it off)"
    support = support or detect_support()
    if not support.available:
        refused = "; process tools are refused: the locked file requires a sandbox" if policy.required else ""
        return f"{support.describe()}{refused}"
    network = "network on" if policy.network else "network off"
    if not policy.network and policy.network_rules is not None and support.net_namespace:
        network = f"network: {len(policy.network_rules.allow[0])} allowed names through toolrt's proxy"
    return f"{support.describe()} ({policy.mode}, {network})"


def sandbox_problems(policy: SandboxPolicy, support: Support | None = None) -> list[Problem]:
    """A warning when processes would run without any OS sandbox (never a silent run that claims one)."""
    support = support or detect_support()
    if policy.mode == "off" or support.available:
        return []
    consequence = (
        "process tools are refused (the locked file requires a sandbox)"
        if policy.required
        else "bash, argv and shell tools run with the user's full rights"
    )
    return [
        Problem(
            "<sandbox>",
            0,
            0,
            "",
            f"no OS sandbox on this machine: {support.reason}; {consequence}. Use a kernel with Landlock "
            "(Linux 5.13+) or install bubblewrap.",
            "warning",
        )
    ]


def _located(document: Document, pointer: str, found: list[tuple[str, str]]) -> list[Problem]:
    problems = []
    for key, message in found:
        at = f"{pointer}/{key}"
        line, column = document.locate(at)
        problems.append(Problem(document.name, line, column, at, message))
    return problems
