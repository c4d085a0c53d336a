"""No test touches the person's own toolrt directories: not tests, not module-scoped fixtures.

The session-wide guard lives in conftest.py (`HOME_GUARD`): these tests show that it sees a write and
that what runs before the per-test fixtures already has a temporary data directory.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import HOME_GUARD, HomeGuard

from toolrt import Runtime
from toolrt.config.settings import default_data_dir, user_settings_file


@pytest.fixture(scope="module")
def early_runtime(tmp_path_factory: pytest.TempPathFactory, project_writer: Callable[..., Path]) -> Runtime:
    """Built before any function-scoped fixture (the autouse data directory) runs."""
    root = project_writer(tmp_path_factory.mktemp("early") / "project", builtin_tools=True)
    (root / "notes.txt").write_text("early\n", encoding="utf-8")
    return Runtime.load(root)


def test_module_scoped_fixtures_write_under_a_temporary_data_dir(early_runtime: Runtime) -> None:
    data_dir = early_runtime.settings.values.data_dir
    audit = early_runtime.settings.values.audit_path
    assert audit is not None and audit.is_relative_to(data_dir)
    assert not (str(data_dir) + os.sep).startswith(HOME_GUARD.watched), data_dir
    assert early_runtime.settings.origins["data_dir"] == "environment TOOLRT_DATA_DIR"
    result = early_runtime.call_sync("read", {"filePath": "notes.txt"}, session="early")
    assert result.error is None and audit.is_file()


def test_the_guard_sees_writes_under_a_watched_directory_and_not_reads(tmp_path: Path) -> None:
    guard = HomeGuard()
    guard.watched = (str(tmp_path / "home-data") + os.sep,)
    guard.armed = True
    target = str(tmp_path / "home-data" / "audit.jsonl")
    guard.hook("open", (target, "r", os.O_RDONLY))
    guard.hook("open", (str(tmp_path / "elsewhere.jsonl"), "a", os.O_WRONLY | os.O_APPEND))
    assert guard.writes == []
    guard.hook("open", (target, "a", os.O_WRONLY | os.O_APPEND))
    guard.hook("open", (target.encode(), None, os.O_WRONLY | os.O_CREAT))
    guard.hook("os.mkdir", (str(tmp_path / "home-data"), 0o777, -1))
    assert guard.writes == [f"open {target}", f"open {target}", f"os.mkdir {tmp_path / 'home-data'}"]


def test_the_session_guard_watches_the_real_directories_not_the_temporary_ones() -> None:
    assert HOME_GUARD.armed
    temporary = (default_data_dir(), user_settings_file().parent, Path(os.environ["TOOLRT_DATA_DIR"]))
    assert all(not (str(path) + os.sep).startswith(HOME_GUARD.watched) for path in temporary), HOME_GUARD.watched
    assert [w for w in HOME_GUARD.watched if w.rstrip(os.sep).endswith("toolrt")]
