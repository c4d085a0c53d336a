"""The `skill` tool: load the instructions of one SKILL.md; its description lists the skills there are.

Skills live in `<root>/.toolrt/skills/<dir>/SKILL.md` and `~/.config/toolrt/skills/<dir>/SKILL.md`;
each starts with YAML frontmatter holding `name` and `description`. A project skill replaces a
user skill of the same name. A project SKILL.md that resolves outside the project (a symlink planted
in a repository) is ignored, so loading a skill never reads a file the person did not put there; a
project skill the model wrote or changed and the person has not approved (`toolrt.attribution`) is
refused until `toolrt trust` approves it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..attribution import journal_for
from ..beneath import is_within, open_checked
from ..errors import PathChanged, ToolFailure

if TYPE_CHECKING:  # imported for annotations only: a build loads this module for its describe hook
    from ..attribution import Hold
    from ..build.compiled import DescribeInfo
    from ..call.context import ToolContext

__all__ = ["Skill", "describe", "discover_skills", "is_project_skill", "skill", "split_frontmatter"]

_MAX_SKILL_BYTES = 1024 * 1024
PLACEHOLDER = "{skills}"


@dataclass(frozen=True, slots=True)
class Skill:
    """One loadable skill."""

    name: str
    description: str
    directory: Path
    """The directory holding SKILL.md; files the skill mentions are relative to it."""
    content: str
    """SKILL.md without its frontmatter."""
    text: str = ""
    """SKILL.md as read (its held check is of exactly this text)."""


def discover_skills(root: Path, home: Path) -> dict[str, Skill]:
    """Every valid skill, user skills first and project skills over them; files that do not parse are skipped."""
    skills: dict[str, Skill] = {}
    for base, confine in ((home / ".config" / "toolrt" / "skills", None), (root / ".toolrt" / "skills", root)):
        for path in sorted(base.glob("*/SKILL.md")):
            found = _load(path, confine)
            if found is not None:
                skills[found.name] = found
    return skills


def is_project_skill(skill: Skill, root: Path) -> bool:
    """Whether `skill` lies in the project, as named or as its real path: a $HOME that is a symlink into
    the project names the project's own directory as the user's."""
    return is_within(skill.directory, root) or is_within(skill.directory.resolve(), root.resolve())


def _held(skill: Skill, root: Path, data_dir: Path) -> Hold | None:
    """Why a project skill's SKILL.md, as read, is held (the model wrote it; the person has not approved it)."""
    if not is_project_skill(skill, root):
        return None
    return journal_for(data_dir).hold(skill.directory / "SKILL.md", root, text=skill.text)


def describe(description: str, info: DescribeInfo) -> str:
    """The tool description with the available skills put in place of `{skills}` (appended when absent);
    a project skill whose SKILL.md is held is not listed (its text is the model's, not yet approved)."""
    skills = discover_skills(info.root, info.home)
    if info.data_dir is not None:
        data_dir = info.data_dir
        skills = {name: found for name, found in skills.items() if _held(found, info.root, data_dir) is None}
    if skills:
        from html import escape  # only with skills to list: every build runs this hook

        entries = "".join(
            f"  <skill>\n    <name>{escape(item.name, quote=False)}</name>\n"
            f"    <description>{escape(item.description, quote=False)}</description>\n  </skill>\n"
            for item in sorted(skills.values(), key=lambda s: s.name)
        )
        listing = f"<available_skills>\n{entries}</available_skills>"
    else:
        listing = "No skills are currently available."
    if PLACEHOLDER in description:
        return description.replace(PLACEHOLDER, listing)
    return f"{description.rstrip()}\n\n{listing}"


async def skill(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """The content of the skill called `name`, headed by its base directory.

    Raises ToolFailure naming the available skills when there is no skill of that name.
    """
    import anyio.to_thread  # here, not at the top: a build imports this module for its describe hook

    name = str(args["name"])
    skills = await anyio.to_thread.run_sync(discover_skills, ctx.root, Path.home())
    chosen = skills.get(name)
    if chosen is not None and is_within(chosen.directory, ctx.root):
        hold = _held(chosen, ctx.root, ctx.data_dir)
        if hold is not None:
            raise ToolFailure(
                f"Skill {name!r} was {hold.reason()} (the person reviews it). Continue without it, or ask the "
                "person to approve it."
            )
    if chosen is None:
        if not skills:
            raise ToolFailure(
                f"Skill {name!r} not found: no skills are installed (no SKILL.md under .toolrt/skills/ or "
                "~/.config/toolrt/skills/). Continue without a skill."
            )
        raise ToolFailure(
            f"Skill {name!r} not found. Available skills: {', '.join(sorted(skills))}. "
            "Call skill with one of these names."
        )
    return {
        "title": f"Loaded skill: {chosen.name}",
        "output": f"## Skill: {chosen.name}\n\n**Base directory**: {chosen.directory}\n\n{chosen.content.strip()}",
        "metadata": {"name": chosen.name, "dir": str(chosen.directory)},
    }


def _load(path: Path, confine: Path | None) -> Skill | None:
    """The skill at `path`; None when it does not parse, is too large, resolves outside `confine`, or
    changes while it is read (opened beneath `/` without following a symlink: exactly the real path
    that was checked, see `beneath`)."""
    try:
        real = path.resolve(strict=True)
        if confine is not None and not is_within(real, confine.resolve()):
            return None
        fd = open_checked(real, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            status = os.fstat(handle.fileno())
            if not stat.S_ISREG(status.st_mode) or status.st_size > _MAX_SKILL_BYTES:
                return None
            text = handle.read(_MAX_SKILL_BYTES + 1).decode("utf-8")
    except (OSError, UnicodeDecodeError, RuntimeError, PathChanged):
        return None
    frontmatter, body = split_frontmatter(text)
    if frontmatter is None:
        return None
    try:
        meta = yaml.safe_load(frontmatter)
    except yaml.YAMLError:
        return None
    if not isinstance(meta, dict):
        return None
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not name.strip() or not isinstance(description, str):
        return None
    return Skill(name.strip(), " ".join(description.split()), path.parent, body, text)


def split_frontmatter(text: str) -> tuple[str | None, str]:
    """`---\\nYAML\\n---\\nbody` → (YAML, body); (None, text) when there is no frontmatter."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None, text
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            return "".join(lines[1:index]), "".join(lines[index + 1 :])
    return None, text
