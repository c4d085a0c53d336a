"""Attacks on issue 25 item 1 before any check can run: Python code the model wrote that the interpreter
running toolrt imports at start-up, outside every sandbox.

- `python -m toolrt` (the `toolrt` command) in the project directory: Python puts that directory first
  on `sys.path`, so a `yaml.py` there would be imported instead of the library.
- toolrt installed in the project's own environment (`.venv` inside the root): a `.pth` file a process
  put in its site-packages runs at the interpreter's next start.

Real bash through toolrt's `bash` tool, the real kernel sandbox, the ruleset `bash: {"*": allow}`; the
model's commands are in a script the analyzer does not read (`bash stage.sh`), so only the boundary
stands. A marker file outside the project proves the model's code ran.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

import toolrt
from toolrt.config.resources import builtin_root

PERMISSIONS = 'permission:\n  "*": allow\n  bash: {"*": allow}\n  edit: allow\n  write: allow\n  webfetch: deny\n'
PAYLOAD = "import pathlib; pathlib.Path({marker!r}).write_text('the model ran')"


def _toolrt(python: str, root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLRT_", "PYTHON"))}
    return subprocess.run(
        [python, "-m", "toolrt", *argv], cwd=root, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def _bash(python: str, root: Path, script: str) -> dict[str, object]:
    """The model's script, run by toolrt's `bash` tool in a fresh `toolrt call` command."""
    (root / "stage.sh").write_text(script, encoding="utf-8")
    done = _toolrt(python, root, "call", "bash", json.dumps({"command": "bash stage.sh", "description": "x"}), "--json")
    result: dict[str, object] = json.loads(done.stdout)
    assert "landlock" in str(result["metadata"]), result  # the real kernel sandbox ran it
    return result


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "permissions.yaml").write_text(PERMISSIONS, encoding="utf-8")
    return root


def test_python_m_toolrt_in_the_project_does_not_import_the_models_modules(project: Path, tmp_path: Path) -> None:
    marker = tmp_path / "outside" / "yaml-ran.txt"
    marker.parent.mkdir()
    payload = PAYLOAD.format(marker=str(marker)) + "\\nfrom importlib import import_module\\n"
    result = _bash(sys.executable, project, f'printf "{payload}" > yaml.py\n')
    assert result["error"] is None and (project / "yaml.py").is_file()  # the model's module is there

    listed = _toolrt(sys.executable, project, "list")
    assert not marker.exists(), "the model's yaml.py ran inside `python -m toolrt`"
    assert listed.returncode == 0, listed.stderr
    assert "bash" in listed.stdout


def test_the_environment_toolrt_runs_from_inside_the_project_is_read_only(project: Path, tmp_path: Path) -> None:
    marker = tmp_path / "outside" / "pth-ran.txt"
    marker.parent.mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(project / ".venv")], check=True, timeout=60)
    python = str(project / ".venv" / "bin" / "python")
    packages = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    # The person's install: this environment sees toolrt (installed in the test's environment).
    (Path(packages) / "person.pth").write_text(f"import site; site.addsitedir({site.getsitepackages()[0]!r})\n")
    pth = Path(packages, "zz.pth").relative_to(project)
    result = _bash(python, project, f"echo {json.dumps(PAYLOAD.format(marker=str(marker)))} > {pth}\n")
    assert "Read-only file system" in str(result["output"]), result
    assert "is protected" in str(result["output"])
    assert not (project / pth).exists()

    listed = _toolrt(python, project, "list")
    assert not marker.exists(), "a .pth file the model wrote ran at toolrt's next start"
    assert listed.returncode == 0, listed.stderr


def test_a_plugin_installed_from_inside_the_project_is_checked_before_its_entry_point_loads(
    project: Path, tmp_path: Path
) -> None:
    """`pip install -e plugins/myplugin` from inside the project: the distribution's metadata is in the
    environment, its source in the project. toolrt loads plugin entry points while it reads the config,
    at every start: the module must be checked against the journal by then."""
    marker = tmp_path / "outside" / "plugin-ran.txt"
    marker.parent.mkdir()
    source = project / "plugins" / "src"
    (source / "myplugin" / "tools.d").mkdir(parents=True)
    tools_dir = 'from pathlib import Path\nTOOLS_DIR = Path(__file__).resolve().parent / "tools.d"\n'
    (source / "myplugin" / "__init__.py").write_text(tools_dir, encoding="utf-8")
    metadata = tmp_path / "site" / "myplugin-0.1.dist-info"  # the person's editable install
    metadata.mkdir(parents=True)
    (metadata / "METADATA").write_text("Metadata-Version: 2.1\nName: myplugin\nVersion: 0.1\n", encoding="utf-8")
    (metadata / "entry_points.txt").write_text("[toolrt.tools]\nmyplugin = myplugin:TOOLS_DIR\n", encoding="utf-8")
    search = f"{metadata.parent}{os.pathsep}{source}"
    wrapper = tmp_path / "python"  # the person's interpreter, with the install on its path
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={search} exec {sys.executable} "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)

    listed = _toolrt(str(wrapper), project, "list")
    assert listed.returncode == 0 and "myplugin" not in listed.stderr, listed.stderr  # the person's plugin loads
    payload = PAYLOAD.format(marker=str(marker)) + "\n" + tools_dir
    result = _bash(str(wrapper), project, f"printf %s {shlex.quote(payload)} > plugins/src/myplugin/__init__.py\n")
    assert result["error"] is None, result

    _toolrt(str(wrapper), project, "list")
    assert not marker.exists(), "the model's plugin module ran at toolrt's next start"


def test_toolrt_run_from_a_checkout_inside_the_project_is_read_only(project: Path, tmp_path: Path) -> None:
    """toolrt's own source inside the project (its repository used as a project, installed in editable
    mode): a module of it the model changed would run at the next start, before any check."""
    marker = tmp_path / "outside" / "toolrt-ran.txt"
    marker.parent.mkdir()
    checkout = project / "src" / "toolrt"
    shutil.copytree(Path(toolrt.__file__).parent, checkout, ignore=shutil.ignore_patterns("__pycache__"))
    builtin = builtin_root()
    for name in ("tools.d", "schemas"):
        shutil.copytree(builtin / name, checkout / "_builtin" / name)
    for name in ("permissions.yaml", "toolrt.yaml"):
        shutil.copy(builtin / name, checkout / "_builtin" / name)
    # The person's interpreter, with the checkout on its path; not measured by the suite's coverage, which
    # would count this copy of the package's files as the package's.
    wrapper = tmp_path / "python"
    unmeasured = "unset COVERAGE_PROCESS_CONFIG COVERAGE_PROCESS_START"
    wrapper.write_text(
        f'#!/bin/sh\n{unmeasured}\nPYTHONPATH={project / "src"} exec {sys.executable} "$@"\n', encoding="utf-8"
    )
    wrapper.chmod(0o755)
    line = PAYLOAD.format(marker=str(marker))
    result = _bash(str(wrapper), project, f"echo {shlex.quote(line)} >> src/toolrt/errors.py\n")
    assert "Read-only file system" in str(result["output"]), result
    assert line not in (project / "src" / "toolrt" / "errors.py").read_text()

    listed = _toolrt(str(wrapper), project, "list")
    assert not marker.exists(), "a toolrt module the model changed ran at toolrt's next start"
    assert listed.returncode == 0, listed.stderr
