"""Installing toolrt as a user does, without a registry: the wheel `pip install .` builds, and
`pip install -e .`, into a fresh virtual environment give `import toolrt`, `python -m toolrt` and the
`toolrt` command; the generic name `runtime` is not installed, and a user project with its own
`runtime/` package works.

No registry traffic, from inside any environment the suite runs in (a virtual environment, as users
run it, or a machine interpreter): the wheel is built once by this environment's own pip and build
backend (hatchling, in the test extra: `--no-build-isolation`). The fresh environment has no system
site packages; a `.pth` file appends this environment's site-packages to its path (read-only), so
that pip, hatchling and toolrt's dependencies are found there, while toolrt itself is installed into
the fresh environment alone (`--no-deps`, `--ignore-installed`, and `--no-index`: pip may not look
at an index, or for a newer pip).
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from measured import unmeasured

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow  # a virtual environment and a build per case


def _environment(home: Path) -> dict[str, str]:
    """The caller's environment minus what would point Python at this checkout or measure the copy
    installed in the virtual environment (it is not the source tree coverage reports on)."""
    env = {
        key: value
        for key, value in unmeasured(os.environ).items()
        if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not key.startswith("PIP_")
    }
    env.update(
        PIP_NO_INDEX="1",
        PIP_NO_CACHE_DIR="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_CONFIG_FILE=os.devnull,
        # Anything that still tried the network would fail here instead of reaching it.
        HTTP_PROXY="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9",
        NO_PROXY="",
        HOME=str(home),
    )
    return env


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """toolrt's wheel, built from this checkout with this environment's pip and hatchling."""
    base = tmp_path_factory.mktemp("wheel")
    env = _environment(base / "home")
    (base / "home").mkdir()
    dist = base / "dist"
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w", str(dist), str(REPO)],
        env,
        base,
    )
    [built] = dist.glob("toolrt-*.whl")
    return built


def _borrowing_venv(venv: Path, env: dict[str, str]) -> Path:
    """A new virtual environment (no system site packages, no pip of its own) whose path ends with this
    environment's site-packages; returns its python."""
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], env, venv.parent)
    python = venv / "bin" / "python"
    own = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], env, venv).strip()
    assert Path(own).is_relative_to(venv), own
    borrowed = [path for path in site.getsitepackages() if Path(path).is_dir()]
    # Named to sort last: the path entries of what the fresh environment installs come first.
    (Path(own) / "zz_test_environment.pth").write_text("\n".join(borrowed) + "\n", encoding="utf-8")
    return python


@pytest.fixture(scope="module", params=["regular", "editable"])
def installed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, wheel: Path
) -> tuple[Path, dict[str, str]]:
    """A virtual environment with toolrt installed from this checkout: (its python, the environment)."""
    base = tmp_path_factory.mktemp(f"install-{request.param}")
    env = _environment(base / "home")
    (base / "home").mkdir()
    python = _borrowing_venv(base / "venv", env)
    target = ["-e", str(REPO)] if request.param == "editable" else [str(wheel)]
    pip = [str(python), "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index", "--no-deps"]
    _run([*pip, "--ignore-installed", *target], env, base)
    return python, env


def test_the_fresh_environment_sees_no_system_site_packages(installed: tuple[Path, dict[str, str]]) -> None:
    python, env = installed
    venv = python.parent.parent
    config = (venv / "pyvenv.cfg").read_text(encoding="utf-8")
    assert "include-system-site-packages = false" in config, config
    probe = "import sys; print(sys.flags.no_site, sys.prefix != sys.base_prefix)"
    assert _run([str(python), "-c", probe], env, venv).split() == ["0", "True"]


def test_import_toolrt_and_python_m_toolrt(installed: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    python, env = installed
    where = Path(_run([str(python), "-c", "import toolrt; print(toolrt.__file__)"], env, tmp_path).strip())
    editable = where == REPO / "runtime" / "toolrt" / "__init__.py"
    assert editable or where.is_relative_to(python.parent.parent), where  # this checkout, or the venv's copy
    version = _run([str(python), "-m", "toolrt", "--version"], env, tmp_path)
    assert version.startswith("toolrt "), version
    assert _run([str(python.parent / "toolrt"), "--version"], env, tmp_path) == version


def test_runtime_is_not_an_installed_top_level_name(installed: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    python, env = installed
    probe = "import importlib.util; print(importlib.util.find_spec('runtime'))"
    assert _run([str(python), "-c", probe], env, tmp_path).strip() == "None"
    listing = (
        "import importlib.metadata as m; print('\\n'.join(sorted({str(f).split('/')[0] for f in m.files('toolrt')})))"
    )
    tops = _run([str(python), "-c", listing], env, tmp_path).split()
    assert "runtime" not in tops and "runtime.py" not in tops, tops


def test_a_user_project_with_its_own_runtime_package_works(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    python, env = installed
    project = tmp_path / "app"
    (project / "runtime").mkdir(parents=True)
    (project / "runtime" / "__init__.py").write_text("WHO = 'the user project'\n", encoding="utf-8")
    (project / "toolrt.yaml").write_text("builtin_tools: [read]\n", encoding="utf-8")
    (project / "notes.txt").write_text("hello from the project\n", encoding="utf-8")
    (project / "main.py").write_text(
        textwrap.dedent(
            """\
            import runtime
            from toolrt import Runtime

            rt = Runtime.load(".")
            result = rt.call_sync("read", {"filePath": "notes.txt"})
            print(runtime.WHO, "|", (result.error or result.output).replace("\\n", " "))
            """
        ),
        encoding="utf-8",
    )
    out = _run([str(python), "main.py"], env, project)
    assert out.startswith("the user project | "), out
    assert "hello from the project" in out
    listed = _run([str(python), "-m", "toolrt", "list", "--root", "."], env, project)
    assert "read" in listed
