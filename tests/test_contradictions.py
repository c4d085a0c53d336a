"""Small contradictions a newcomer meets: what `settings` shows, what an ask is titled, what `lsp check` prints."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from cli_helpers import run

from toolrt import Runtime
from toolrt.permissions.ask import AskRequest, Reply

SLOW_SERVER = """\
import json, sys, time
stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
def read():
    length = 0
    while (line := stdin.readline().strip()):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(stdin.read(length)) if length else None
while (message := read()) is not None:
    if "id" in message:
        if message.get("method") == "initialize":
            time.sleep(float(sys.argv[1]))  # answers after the client gave up
        body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"capabilities": {}}}).encode()
        stdout.write(b"Content-Length: %d\\r\\n\\r\\n%s" % (len(body), body))
        stdout.flush()
"""


def test_settings_show_the_sandbox_the_project_file_sets(tmp_path: Path) -> None:
    (tmp_path / "toolrt.yaml").write_text("defaults: {timeout: 60}\nsandbox:\n  network: false\n", encoding="utf-8")
    code, out, _ = run("settings", "--root", str(tmp_path))
    assert code == 0
    rows = {line.split()[-1]: line.split()[0] for line in out.splitlines()}
    assert rows["sandbox.network=False"] == "toolrt.yaml:3"
    assert rows["sandbox.mode=workspace-write"] == "default"
    code, out, _ = run("settings", "--root", str(tmp_path), "--json")
    assert json.loads(out)["settings"]["sandbox.network"] == {"value": False, "origin": "toolrt.yaml:3"}


def test_a_bash_ask_is_titled_with_the_call_title(tmp_path: Path) -> None:
    (tmp_path / "permissions.yaml").write_text("permission:\n  bash: ask\n", encoding="utf-8")
    asked: list[AskRequest] = []

    async def asker(request: AskRequest) -> Reply:
        asked.append(request)
        return Reply("reject")

    rt = Runtime.load(tmp_path)
    args = {"command": "ls", "description": "List the project files"}
    result = anyio.run(lambda: rt.call("bash", args, ask=asker))
    assert result.error is not None
    [request] = asked
    assert request.title == "List the project files"


@pytest.mark.slow  # starts a language server (a small Python script) twice
def test_lsp_check_of_a_server_that_answers_late_prints_no_trace(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = tmp_path / "slow_server.py"
    script.write_text(SLOW_SERVER, encoding="utf-8")
    servers = {"slow": {"command": [sys.executable, str(script), "0.4"], "extensions": [".x"]}}
    monkeypatch.setenv("TOOLRT_LSP__ENABLED", "true")
    monkeypatch.setenv("TOOLRT_LSP__SERVERS", json.dumps(servers))
    project = tmp_path / "p"
    project.mkdir()
    code, out, err = run("lsp", "check", "--root", str(project), "--server", "slow", "--timeout", "0.1")
    assert code == 1 and "did not answer initialize within 0.1 seconds" in out
    captured = capfd.readouterr()
    logged = [(record.getMessage(), record.exc_info) for record in caplog.records if record.levelname != "DEBUG"]
    assert not [entry for entry in logged if entry[1] is not None or "malformed" in entry[0]], logged
    for text in (err, captured.err, captured.out):
        assert "Traceback" not in text and "never retrieved" not in text and "malformed" not in text, text
