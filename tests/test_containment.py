"""`beneath.is_within`, the one "is this path inside that root" of every floor (issue 32, item 3).

The properties are checked against the kernel, not against a second copy of the string logic: a
real directory tree (a project, its look-alike siblings `proj2` and `PROJ`, symlinks out of and into
it) is walked with generated `..`, `.`, repeated and trailing slashes, and the kernel's own answer
(following `..` from the opened directory up to `/`, comparing inodes) is the oracle. Then each
caller is attacked with the escapes it must refuse (`..`, a sibling sharing the root's prefix, a
symlink out of the root, a symlink into the project).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolrt.beneath import is_within, steady_realpath
from toolrt.builtin.filepaths import external_patterns
from toolrt.builtin.skill import discover_skills
from toolrt.call.permissions import external_directories
from toolrt.lsp.servers import resolve_program
from toolrt.permissions.model import CallSite
from toolrt.permissions.protected import ProtectedPaths
from toolrt.shell import analyze_command

_DIRECTORY = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`base/{proj/{a/b, link_out -> ../outside, link_in -> a}, proj2/a, PROJ/a, outside/a}`."""
    base = tmp_path_factory.mktemp("containment").resolve()
    for directory in ("proj/a/b", "proj2/a", "PROJ/a", "outside/a"):
        (base / directory).mkdir(parents=True)
    (base / "proj" / "link_out").symlink_to(base / "outside")
    (base / "proj" / "link_in").symlink_to("a")
    return base


def _really_within(path: str, root: str) -> bool:
    """The kernel's answer: `root`'s directory is `path`'s directory or one it reaches by `..`."""
    target = os.stat(root)
    fd = os.open(path, _DIRECTORY)
    try:
        while True:
            here = os.fstat(fd)
            if (here.st_dev, here.st_ino) == (target.st_dev, target.st_ino):
                return True
            parent = os.open("..", _DIRECTORY, dir_fd=fd)
            above = os.fstat(parent)
            os.close(fd)
            fd = parent
            if (above.st_dev, above.st_ino) == (here.st_dev, here.st_ino):
                return False  # `/`: its `..` is itself
    finally:
        os.close(fd)


_STEP = st.sampled_from(["a", "b", "proj", "proj2", "PROJ", "outside", "..", ".", ""])
_SYMLINK_STEP = st.sampled_from(["a", "b", "proj", "proj2", "outside", "link_out", "link_in", "..", "."])
_ROOTS = st.sampled_from(["proj", "proj/a", "proj2", "PROJ", "outside", ""])
_ROOT_SPELLINGS = st.sampled_from(["{}", "{}/", "{}//", "/{}", "{}/.", "{}/a/.."])


def _existing(base: Path, steps: list[str], *, trailing: bool) -> str | None:
    """`base/steps...` as written, when the kernel finds a directory there (else None)."""
    text = str(base) + "/" + "/".join(steps) + ("/" if trailing else "")
    return text if os.path.isdir(text) else None


def _root_text(base: Path, root: str, spelling: str) -> str:
    plain = str(base / root) if root else str(base)
    return spelling.format(plain) if os.path.isdir(spelling.format(plain)) else plain


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_STEP, max_size=6), st.booleans(), _ROOTS, _ROOT_SPELLINGS)
def test_a_path_without_symlinks_is_within_exactly_when_the_kernel_reaches_the_root(
    tree: Path, steps: list[str], trailing: bool, root: str, spelling: str
) -> None:
    path = _existing(tree, steps, trailing=trailing)
    if path is None:
        return
    root_text = _root_text(tree, root, spelling)
    assert is_within(path, root_text) == _really_within(path, root_text), (path, root_text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_SYMLINK_STEP, max_size=6), st.booleans(), _ROOTS)
def test_the_real_paths_of_a_path_through_symlinks_are_within_exactly_when_the_kernel_reaches_the_root(
    tree: Path, steps: list[str], trailing: bool, root: str
) -> None:
    path = _existing(tree, steps, trailing=trailing)
    if path is None:
        return
    root_text = str(tree / root)
    assert is_within(steady_realpath(path), steady_realpath(root_text)) == _really_within(path, root_text)


@settings(max_examples=200, deadline=None)
@given(st.lists(_STEP, max_size=6))
def test_every_absolute_path_is_within_the_filesystem_root_in_any_spelling(steps: list[str]) -> None:
    path = "/" + "/".join(steps)
    assert is_within(path, "/")
    assert is_within(path, "//")
    assert is_within(path, "/.")


def test_the_edges_the_callers_meet() -> None:
    assert is_within("/proj", "/proj") and is_within("/proj/", "/proj") and is_within("/proj", "/proj/")
    assert not is_within("/proj2", "/proj") and not is_within("/proj2/x", "/proj/")
    assert not is_within("/PROJ/x", "/proj"), "names compare case-sensitively"
    assert not is_within("/proj/../etc/passwd", "/proj")
    assert is_within("//proj/x", "/proj"), "Linux reads a leading // as /"
    assert not is_within("/", "/proj") and not is_within("/pro", "/proj")
    assert not is_within("proj/x", "/proj") and not is_within("/proj/x", "proj"), "relative and absolute never mix"
    assert is_within("a/b", "a") and is_within("a", ".") and not is_within("../a", ".") and not is_within("..", ".")
    assert is_within(Path("/proj/x"), Path("/proj")), "Paths as well as strings"


# Each caller refuses its escape.


@pytest.fixture
def project(tree: Path) -> Iterator[Path]:
    yield tree / "proj"


def test_the_permission_step_asks_for_every_escape_from_the_root(tree: Path, project: Path) -> None:
    site = CallSite(root=project, cwd=project, home=tree)
    assert external_directories("a/b", site, directory=True) == []
    assert external_directories("../proj2/a", site, directory=True) == [str(tree / "proj2" / "a")]
    assert external_directories("a/../../outside", site, directory=True) == [str(tree / "outside")]
    assert external_directories("link_out/a", site, directory=True) == [str(tree / "outside" / "a")]
    assert external_directories(str(tree / "PROJ" / "a"), site, directory=True) == [str(tree / "PROJ" / "a")]


def test_the_file_tools_ask_for_every_escape_from_the_root(tree: Path, project: Path) -> None:
    assert external_patterns(project / "a" / "b", project, "directory") == ()
    assert external_patterns(tree / "proj2" / "a", project, "directory") == (f"{tree}/proj2/a/*",)
    assert external_patterns(project / "link_out" / "a", project, "directory") == (f"{tree}/outside/a/*",)
    assert external_patterns(Path(f"{project}/a/../../outside"), project, "directory") == (f"{tree}/outside/*",)


def test_the_bash_analysis_asks_for_every_escape_from_the_root(tree: Path, project: Path) -> None:
    site = CallSite(root=project, cwd=project, home=tree)

    def external(command: str) -> tuple[str, ...]:
        asked = [r for r in analyze_command(command, site) if r.permission == "external_directory"]
        return asked[0].patterns if asked else ()

    assert external("ls a/b") == ()
    assert external("ls ../proj2/a") == (f"{tree}/proj2/a/*",)
    assert external(f"ls {project}/../outside") == (f"{tree}/outside/*",)
    assert external("ls link_out/a") == (f"{tree}/outside/a/*",)
    assert external(f"ls {tree}/PROJ/a") == (f"{tree}/PROJ/a/*",)


def test_the_language_servers_refuse_a_program_inside_the_project(tree: Path, project: Path) -> None:
    for directory in (project / "a", tree / "proj2" / "a", tree / "outside" / "a"):
        program = directory / "server"
        program.write_text("#!/bin/sh\n")
        program.chmod(program.stat().st_mode | stat.S_IXUSR)
    inside, sibling = str(project / "a" / "server"), str(tree / "proj2" / "a" / "server")
    assert resolve_program(inside, project) is None
    assert resolve_program(f"{tree}/proj2/../proj/a/server", project) is None
    assert resolve_program(sibling, project) == sibling, "a sibling sharing the root's prefix is outside"
    assert resolve_program("server", project, path=f"{project}/a:{tree}/proj2/a") == sibling
    assert resolve_program("server", project, path=f"{tree}/outside/../proj/a") is None
    # A PATH entry outside that is a symlink into the project is the project's.
    (tree / "outside" / "into").symlink_to(project / "a")
    try:
        assert resolve_program("server", project, path=f"{tree}/outside/into") is None
    finally:
        (tree / "outside" / "into").unlink()


def test_the_protected_paths_apply_root_relative_patterns_only_inside_the_root() -> None:
    protected = ProtectedPaths("/proj", ("conf/secret",))
    assert protected.matches("/proj/conf/secret")
    assert protected.matches("/proj/conf/secret/key"), "beneath a protected directory"
    assert not protected.matches("/proj2/conf/secret")
    assert ProtectedPaths("/", ("conf/secret",)).matches("/conf/secret"), "the filesystem root as the root"


def test_a_project_skill_leading_to_a_sibling_that_shares_the_root_prefix_is_not_loaded(tmp_path: Path) -> None:
    root, sibling, home = tmp_path / "proj", tmp_path / "proj2", tmp_path / "home"
    skills = root / ".toolrt" / "skills"
    for directory, name in ((skills / "kept", "kept"), (sibling / "stolen", "stolen")):
        directory.mkdir(parents=True)
        (directory / "SKILL.md").write_text(f"---\nname: {name}\ndescription: d\n---\nbody\n", encoding="utf-8")
    (skills / "stolen").mkdir()
    (skills / "stolen" / "SKILL.md").symlink_to(sibling / "stolen" / "SKILL.md")
    home.mkdir()
    assert sorted(discover_skills(root, home)) == ["kept"]
