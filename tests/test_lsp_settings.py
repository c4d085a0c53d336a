"""Language-server declarations: built-in entries under host settings, what a project may set, and
commands that resolve from PATH only, never from inside the project."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import ProjectFactory

from toolrt import Runtime
from toolrt.config.settings import LspServerSettings, LspSettings
from toolrt.lsp.servers import configured_servers, find_root, resolve_program

pytestmark = [pytest.mark.usefixtures("collect_garbage")]


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_project_may_switch_a_server_off_and_pass_options_but_not_set_its_command(
    make_project: ProjectFactory,
) -> None:
    root = make_project(
        settings="""\
        lsp:
          wait: 0.5
          servers:
            pyright: {disabled: true}
            pylsp:
              command: [/tmp/evil-server]
              env: {PYTHONPATH: .}
              initialization: {pylsp: {plugins: {pycodestyle: {enabled: false}}}}
        """
    )
    rt = Runtime.load(root)
    resolved = rt.settings
    ignored = {item.key: item.origin for item in resolved.ignored}
    assert ignored == {
        "lsp.servers.pylsp.command": "toolrt.yaml:7",
        "lsp.servers.pylsp.env.PYTHONPATH": "toolrt.yaml:8",
    }
    [warning, *_] = [w for w in resolved.warnings if "lsp.servers.pylsp.command" in w.message]
    assert (warning.file, warning.line) == ("toolrt.yaml", 7)
    assert "host-only setting" in warning.message and "TOOLRT_LSP__SERVERS" in warning.message
    servers = {s.name: s for s in configured_servers(replace(resolved.values.lsp, enabled=True))}
    assert "pyright" not in servers
    assert servers["pylsp"].command == ("pylsp",)
    assert servers["pylsp"].env == ()
    assert servers["pylsp"].initialization_options == {"pylsp": {"plugins": {"pycodestyle": {"enabled": False}}}}
    assert resolved.values.lsp.wait == 0.5


def test_the_host_declares_new_servers_and_commands(
    tmp_path: Path, make_project: ProjectFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = tmp_path / "xdg" / "toolrt" / "settings.yaml"
    settings.parent.mkdir(parents=True)
    settings.write_text(
        "lsp:\n  servers:\n    ruff: {command: [ruff, server], extensions: ['.py'], root_markers: [ruff.toml]}\n"
        "    pylsp: {command: [/opt/pylsp/bin/pylsp]}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    rt = Runtime.load(make_project())
    servers = {s.name: s for s in configured_servers(replace(rt.settings.values.lsp, enabled=True))}
    assert servers["ruff"].command == ("ruff", "server") and servers["ruff"].root_markers == ("ruff.toml",)
    assert servers["pylsp"].command == ("/opt/pylsp/bin/pylsp",)
    assert servers["pylsp"].extensions == (".py", ".pyi")  # the rest of the built-in entry stays
    assert {k: o for k, _, o in rt.settings.items()}["lsp.servers.ruff.command"].endswith("settings.yaml:3")


def test_servers_from_the_environment_as_json(monkeypatch: pytest.MonkeyPatch, make_project: ProjectFactory) -> None:
    monkeypatch.setenv("TOOLRT_LSP__SERVERS", '{"zls": {"command": ["zls"], "extensions": [".zig"]}}')
    rt = Runtime.load(make_project())
    lsp = replace(rt.settings.values.lsp, enabled=True)
    assert [s.command for s in configured_servers(lsp) if s.name == "zls"] == [("zls",)]
    monkeypatch.setenv("TOOLRT_LSP__SERVERS", "[1]")
    with pytest.raises(Exception, match="lsp.servers: a JSON object is expected"):
        Runtime.load(make_project())


def test_switched_off_means_no_server() -> None:
    assert configured_servers(LspSettings(enabled=False)) == ()
    off = LspSettings(servers={name: LspServerSettings(disabled=True) for name in ("pyright", "pylsp")})
    assert not any(s.serves(Path("a.py")) for s in configured_servers(off))


def test_extensions_and_globs() -> None:
    [server] = [
        s
        for s in configured_servers(
            LspSettings(
                servers={"docker": LspServerSettings(command=("x",), extensions=("Dockerfile", "*.dockerfile"))}
            )
        )
        if s.name == "docker"
    ]
    assert server.serves(Path("/p/Dockerfile")) and server.serves(Path("/p/app.dockerfile"))
    assert not server.serves(Path("/p/app.py"))


def test_a_command_never_resolves_inside_the_project(tmp_path: Path) -> None:
    root = tmp_path / "project"
    inside = _executable(root / ".venv" / "bin" / "fake-ls")
    outside = _executable(tmp_path / "bin" / "fake-ls")
    path = os.pathsep.join([str(root / ".venv" / "bin"), "relative/bin", str(tmp_path / "bin")])
    assert resolve_program("fake-ls", root, path=path) == str(outside)
    assert resolve_program("fake-ls", root, path=str(root / ".venv" / "bin")) is None
    assert resolve_program(str(inside), root, path="") is None
    assert resolve_program(".venv/bin/fake-ls", root, path="") is None
    link = tmp_path / "bin" / "linked-ls"
    link.symlink_to(inside)
    assert resolve_program("linked-ls", root, path=str(tmp_path / "bin")) is None
    assert resolve_program(str(link), root, path="") is None
    assert resolve_program("no-such-ls", root, path=str(tmp_path / "bin")) is None


def test_the_root_is_the_nearest_marker_up_to_the_project(tmp_path: Path) -> None:
    [server] = [s for s in configured_servers(LspSettings()) if s.name == "gopls"]
    (tmp_path / "svc" / "api").mkdir(parents=True)
    (tmp_path / "svc" / "go.mod").write_text("module svc\n", encoding="utf-8")
    assert find_root(server, tmp_path / "svc" / "api" / "main.go", tmp_path) == tmp_path / "svc"
    assert find_root(server, tmp_path / "other.go", tmp_path) == tmp_path
