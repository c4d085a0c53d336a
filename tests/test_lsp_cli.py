"""`toolrt lsp check`, `toolrt validate`'s language-server warnings, and `toolrt serve`'s log of them."""

from __future__ import annotations

import io
import json
import logging
import os
import sys
from pathlib import Path

import anyio
import pytest
from conftest import ProjectFactory
from lsp_helpers import all_gone, pylsp_command, wait_until
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from toolrt.faces.cli import main
from toolrt.faces.serve import _log_language_servers

REPO = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.usefixtures("collect_garbage")]


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLRT_LSP__ENABLED", "true")
    monkeypatch.setenv(
        "TOOLRT_LSP__SERVERS",
        json.dumps(
            {"pylsp": {"command": pylsp_command()}, "broken": {"command": ["/bin/false"], "extensions": [".x"]}}
        ),
    )


@pytest.mark.slow
def test_lsp_check_starts_initializes_reports_and_stops(servers: None, make_project: ProjectFactory) -> None:
    code, out, _ = run(["lsp", "check", "--root", str(make_project()), "--server", "pylsp", "--json"])
    assert code == 0
    [row] = json.loads(out)["servers"]
    assert row["name"] == "pylsp" and row["status"] == "ok"
    assert {"definition", "references", "hover", "documentSymbol"} <= set(row["supports"])


def test_lsp_check_fails_for_a_server_that_does_not_start(servers: None, make_project: ProjectFactory) -> None:
    code, out, _ = run(["lsp", "check", "--root", str(make_project()), "--server", "broken"])
    assert code == 1
    assert out.startswith("broken  failed         language server broken (/bin/false) exited with status 1")


def test_lsp_check_names_what_is_configured(servers: None, make_project: ProjectFactory) -> None:
    code, _, err = run(["lsp", "check", "--root", str(make_project()), "--server", "pyrite"])
    assert code == 2
    assert "unknown language server 'pyrite' (configured: bash, broken, clangd, gopls, pylsp, pyright" in err


def test_validate_warns_of_a_missing_command_and_an_undeclared_server(
    monkeypatch: pytest.MonkeyPatch, make_project: ProjectFactory
) -> None:
    monkeypatch.setenv("TOOLRT_LSP__ENABLED", "true")
    monkeypatch.setenv("TOOLRT_LSP__SERVERS", '{"ruff": {"command": ["no-such-ruff", "server"]}}')
    root = make_project(settings="lsp:\n  servers:\n    pyrite:\n      initialization: {a: 1}\n")
    code, out, _ = run(["validate", "--root", str(root), "--format", "json"])
    assert code == 0
    warnings = {w["message"]: (w["file"], w["line"]) for w in json.loads(out)["warnings"]}
    missing = (
        "language server 'ruff': its command `no-such-ruff` is not installed (not found on PATH outside the "
        "project, or not an executable file), so it will not start"
    )
    assert warnings[missing][0].endswith("environment TOOLRT_LSP__SERVERS")
    [undeclared] = [m for m in warnings if m.startswith("language server 'pyrite' is not declared")]
    assert warnings[undeclared] == (str(root / "toolrt.yaml"), 5)


def test_serve_logs_language_servers_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    detach = _log_language_servers()
    try:
        logging.getLogger("toolrt.lsp").info("language server %s restarting for %s", "pylsp", Path("/p"))
    finally:
        detach()
    logging.getLogger("toolrt.lsp").info("not shown once detached")
    assert capsys.readouterr().err == "toolrt serve: language server pylsp restarting for /p\n"


def _pylsp_pids(root: Path) -> list[int]:
    """pylsp processes working in `root` (each test's root is its own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "cwd") == str(root) and b"pylsp" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.slow  # spawns `toolrt serve` and pylsp
def test_serve_diagnoses_edits_and_leaves_no_language_server_behind(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    env = {
        **os.environ,
        "TOOLRT_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": str(REPO / "runtime"),
        "TOOLRT_LSP__ENABLED": "true",
        "TOOLRT_LSP__WAIT": "20",
        "TOOLRT_LSP__SERVERS": json.dumps({"pylsp": {"command": pylsp_command()}, "pyright": {"disabled": True}}),
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "toolrt", "serve", "--root", str(root)], env=env, cwd=str(root)
    )
    seen: list[int] = []

    async def main() -> str:
        with anyio.fail_after(60):
            async with Client(params, mode="legacy") as client:
                result = await client.call_tool("write", {"filePath": "app.py", "content": "x = missing\n"})
                seen.extend(_pylsp_pids(root))
                return "".join(getattr(c, "text", "") for c in result.content)

    output = anyio.run(main)
    assert "LSP errors detected in this file, please fix:" in output
    assert "ERROR [1:5] undefined name 'missing'" in output
    assert seen, "no pylsp process was found while serving"
    wait_until(lambda: all_gone(seen), timeout=10, message=f"pylsp outlived toolrt serve: {seen}")
