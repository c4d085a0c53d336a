"""The documented examples work as their READMEs say: each project validates, the plugin loads."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from toolrt.api import Runtime
from toolrt.faces.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("example", ["python-handler", "argv-tool", "shell-tool"])
def test_example_project_validates(example: str) -> None:
    out = io.StringIO()
    assert main(["validate", "--root", str(EXAMPLES / example)], out=out, err=io.StringIO()) == 0, out.getvalue()


def test_python_handler_example_runs(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(EXAMPLES / "python-handler", project)
    rt = Runtime.load(project)
    result = rt.call_sync("json_get", {"filePath": "settings.json", "key": "server.port"})
    assert result.error is None, result.error
    assert "8080" in result.output


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The example plugin as pip would leave it: the package plus a dist-info with its entry point."""
    site = tmp_path / "site-packages"
    shutil.copytree(EXAMPLES / "plugin-package" / "src" / "myplugin", site / "myplugin")
    info = site / "myplugin-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: myplugin\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[toolrt.tools]\nmyplugin = myplugin:TOOLS_DIR\n")
    monkeypatch.syspath_prepend(str(site))  # a new state of sys.path: the plugins are looked up again
    return "myplugin"


def test_plugin_package_tools_are_a_layer(installed_plugin: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    rt = Runtime.load(project)
    timestamp = rt.snapshot.tools["timestamp"]
    assert timestamp.definition.layer == f"plugin:{installed_plugin}"
    result = rt.call_sync("timestamp", {"value": "0"})
    assert result.error is None, result.error
    assert "1970-01-01T00:00:00+00:00" in result.output


def test_project_disables_a_plugin_tool(installed_plugin: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "tools.d").mkdir(parents=True)
    (project / "tools.d" / "timestamp.yaml").write_text("id: timestamp\nenabled: false\n")
    rt = Runtime.load(project)
    assert "timestamp" not in rt.snapshot.tools
