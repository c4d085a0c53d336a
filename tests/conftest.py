"""Shared fixtures: a throwaway project factory and a data directory that never touches the home directory."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from toolrt.permissions.model import CallSite

ProjectFactory = Callable[..., Path]


@pytest.fixture(autouse=True)
def _isolated_data_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test writes truncated outputs and audit logs under its own temporary directory."""
    data = tmp_path_factory.mktemp("toolrt-data")
    monkeypatch.setenv("TOOLRT_DATA_DIR", str(data))
    # The person's own settings file ($XDG_CONFIG_HOME/toolrt/settings.yaml) must not reach the tests.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))
    # The test extra installs a language server (pylsp): without this, every edit of a .py file in any
    # test would start one. The language-server tests switch them on (tests/test_lsp_*.py).
    monkeypatch.setenv("TOOLRT_LSP__ENABLED", "false")
    return data


def write_project(
    root: Path,
    tools: Mapping[str, str] | None = None,
    permissions: str | None = None,
    settings: str | None = None,
    modules: Mapping[str, str] | None = None,
    *,
    builtin_tools: bool = False,
) -> Path:
    """Write `tools.d/<name>.yaml` per tool, `permissions.yaml`, `toolrt.yaml` and handler modules.

    `builtin_tools: false` is prepended to the settings unless `builtin_tools=True`. Texts are dedented.
    """
    root.mkdir(parents=True, exist_ok=True)
    if tools:
        (root / "tools.d").mkdir(exist_ok=True)
        for name, text in tools.items():
            (root / "tools.d" / f"{name}.yaml").write_text(textwrap.dedent(text), encoding="utf-8")
    if permissions is not None:
        (root / "permissions.yaml").write_text(textwrap.dedent(permissions), encoding="utf-8")
    body = textwrap.dedent(settings or "")
    if not builtin_tools:
        body = "builtin_tools: false\n" + body
    if body.strip():
        (root / "toolrt.yaml").write_text(body, encoding="utf-8")
    for name, source in (modules or {}).items():
        path = root / (name.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def project_writer() -> Callable[..., Path]:
    """`write_project` for fixtures of wider scope than `make_project` (no import of conftest needed)."""
    return write_project


@pytest.fixture
def make_project(tmp_path: Path) -> ProjectFactory:
    """`make_project(tools, permissions=None, settings=None, modules=None, builtin_tools=False) -> root`."""
    counter = iter(range(1_000_000))

    def factory(
        tools: Mapping[str, str] | None = None,
        permissions: str | None = None,
        settings: str | None = None,
        modules: Mapping[str, str] | None = None,
        *,
        builtin_tools: bool = False,
    ) -> Path:
        root = tmp_path / f"project{next(counter)}"
        return write_project(root, tools, permissions, settings, modules, builtin_tools=builtin_tools)

    return factory


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An empty project directory (tests that run a tool's handler directly work in it)."""
    project = tmp_path / "project"
    project.mkdir()
    return project


@pytest.fixture
def site(tmp_path: Path) -> CallSite:
    """A call site for the bash analyzer: `project/` as root and cwd, a sibling `home/`."""
    root = tmp_path / "project"
    root.mkdir()
    (tmp_path / "home").mkdir()
    return CallSite(root=root, cwd=root, home=tmp_path / "home")
