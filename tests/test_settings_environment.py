"""TOOLRT_ variables read without pydantic-settings when each is plain text (`_plain_environment`): the
same values pydantic-settings reads from them, which is the oracle here, or None to let it read them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrt.config.settings_sources import _plain_environment, _pydantic_environment

NAMES = (
    "TOOLRT_DATA_DIR",
    "toolrt_data_dir",
    "Toolrt_Timeout",
    "TOOLRT_STORE",
    "TOOLRT_LOCKED_PERMISSIONS",
    "TOOLRT_AUDIT",
    "TOOLRT_ENV_ALLOW",
    "TOOLRT_BACKGROUND",
    "TOOLRT_LSP",
    "TOOLRT_LSP__ENABLED",
    "TOOLRT_LSP__WAIT",
    "TOOLRT_LSP__SERVERS",
    "TOOLRT_LSP__SERVERS__PYLSP__DISABLED",
    "TOOLRT_LSP__ENABLED__X",
    "TOOLRT_LSP.ENABLED",
    "TOOLRT_TRUNCATE__MAX_LINES",
    "TOOLRT_TRUNCATE__DIRECTION",
    "TOOLRT_TRUNCATE",
    "TOOLRT_SERVE__HOST",
    "TOOLRT_SERVE__PORT",
    "TOOLRT_SERVE__TASK_TOOLS",
    "TOOLRT_SANDBOX__MODE",
    "TOOLRT_RETENTION__AUDIT_DAYS",
    "TOOLRT_DATA_DIR__X",
    "TOOLRT_FLAG_FAST",
    "TOOLRT_FLAG_SLOW",
    "TOOLRT_FLAG_Mixed",
    "TOOLRT_REGENERATE",
    "TOOLRT_SERVE_STATE_KEYS",
    "TOOLRT_",
    "PATH",
)
"""Plain settings, sections, lists, deeper keys, flags declared or not, names no setting has."""
VALUES = ("", "false", "TRUE", "1", "2.5", "/tmp/x", "~/data", "[1, 2]", '{"enabled": false}', " yes ", "a,b")


@settings(max_examples=300, deadline=None)
@given(
    environ=st.dictionaries(st.sampled_from(NAMES), st.sampled_from(VALUES), max_size=6),
    flags=st.sets(st.sampled_from(["fast", "Mixed", "mixed", "other"])).map(lambda s: tuple(sorted(s))),
)
def test_plain_variables_are_read_as_pydantic_settings_reads_them(
    environ: dict[str, str], flags: tuple[str, ...]
) -> None:
    plain = _plain_environment(environ, flags)
    if plain is not None:
        assert plain == _pydantic_environment(environ, flags)


@pytest.mark.parametrize(
    ("environ", "flags", "read"),
    [
        (
            {"TOOLRT_DATA_DIR": "/d", "TOOLRT_LSP__ENABLED": "false"},
            (),
            {"data_dir": "/d", "lsp": {"enabled": "false"}},
        ),
        ({"toolrt_timeout": "", "TOOLRT_SERVE__PORT": "80"}, (), {"timeout": "", "serve": {"port": "80"}}),
        ({"TOOLRT_FLAG_FAST": "on", "TOOLRT_REGENERATE": "1", "PATH": "/bin"}, ("fast",), {"flag_fast": "on"}),
    ],
)
def test_the_variables_a_test_or_a_host_sets_are_read_without_pydantic_settings(
    environ: dict[str, str], flags: tuple[str, ...], read: dict[str, object]
) -> None:
    assert _plain_environment(environ, flags) == read == _pydantic_environment(environ, flags)


@pytest.mark.parametrize(
    "environ",
    [
        {"TOOLRT_ENV_ALLOW": '["HOME"]'},  # a list
        {"TOOLRT_LSP": '{"enabled": false}'},  # a section as one JSON object
        {"TOOLRT_LSP__SERVERS": '{"pylsp": {"disabled": true}}'},  # a mapping
        {"TOOLRT_SANDBOX__MODE": "off"},  # a literal
        {"TOOLRT_AUDIT": "false"},  # a boolean or a path
        {"TOOLRT_FLAG_SLOW": "on"},  # a flag the config does not declare
        {"TOOLRT_DATA_DIR": "/d", "TOOLRT_DATA_DIR__X": "y"},
    ],
)
def test_any_other_variable_is_left_to_pydantic_settings(environ: dict[str, str]) -> None:
    assert _plain_environment(environ, ("fast",)) is None


def test_a_process_started_with_a_data_directory_and_lsp_off_imports_no_pydantic_settings(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLRT_")}
    env.update(TOOLRT_DATA_DIR=str(tmp_path / "data"), TOOLRT_LSP__ENABLED="false", XDG_CONFIG_HOME=str(tmp_path))
    code = (
        "import sys\nfrom pathlib import Path\nfrom toolrt.config import settings\n"
        "values = settings.resolve_settings(Path('.')).values\n"
        "print(values.data_dir, values.lsp.enabled, 'pydantic_settings' in sys.modules)"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.stdout.split() == [str(tmp_path / "data"), "False", "False"], run.stderr
