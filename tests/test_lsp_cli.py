"""`toolrt lsp check`, `toolrt validate`'s language-server warnings, and `toolrt serve`'s log of them."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
from conftest import ProjectFactory
from lsp_helpers import pylsp_command

from toolrt.cli import main
from toolrt.serve_mcp import _log_language_servers


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
