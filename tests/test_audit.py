from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from toolrt.audit import AuditLog, read_records
from toolrt.call.record import CallRecord, Recorder
from toolrt.permissions.model import Decision, PatternDecision
from toolrt.result import ToolResult
from toolrt.scope import CallScope
from toolrt.store import session_id

# Every record goes through the Recorder, the one encoder production writes the log with.


def _record(n: int, **arguments: Any) -> CallRecord:
    decision = Decision("allow", (PatternDecision("bash", "echo ✓", "allow", None),))
    return CallRecord(
        CallScope(session="s", model="m"),
        "build",
        "bash",
        f"c{n}",
        {"command": "echo ✓", **arguments},
        decision,
        "ok",
        ToolResult(title="", output="ok"),
        0.0015,
    )


def _written(n: int) -> dict[str, Any]:
    """What `_record(n)` reads back as (but the time)."""
    return {
        "time": "2026-01-01T00:00:00Z",
        "session": session_id("s"),  # the file names a session by its derived id, never its token
        "agent": "build",
        "model": "m",
        "tool": "bash",
        "call_id": f"c{n}",
        "arguments": {"command": "echo ✓"},
        "requests": [{"permission": "bash", "pattern": "echo ✓", "action": "allow", "rule": None}],
        "duration_ms": 1.5,
        "status": "ok",
        "output_bytes": 2,
        "error": None,
    }


def _recorder(path: Path | None) -> Recorder:
    return Recorder(AuditLog(path))


def test_records_round_trip_one_line_each(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "audit.jsonl"
    recorder = _recorder(path)
    recorder.record(_record(1))
    recorder.record(_record(2, odd=Path("/x"), raw="\udcff", text="a\nb"))
    recorder.audit.close()
    lines = path.read_bytes().splitlines()
    assert len(lines) == 2
    assert "✓" in lines[0].decode()  # ensure_ascii=False keeps text readable
    records, bad = read_records(path)
    assert bad == []
    assert records[0] == {**_written(1), "time": records[0]["time"]}
    assert records[1]["arguments"] == {"command": "echo ✓", "odd": "/x", "raw": "\udcff", "text": "a\nb"}
    assert recorder.audit.last_error is None


def test_recording_off_touches_nothing(tmp_path: Path) -> None:
    recorder = _recorder(None)
    recorder.record(_record(1))
    recorder.audit.close()
    assert list(tmp_path.iterdir()) == []


def test_nothing_is_created_before_the_first_record(tmp_path: Path) -> None:
    AuditLog(tmp_path / "a" / "audit.jsonl").close()
    assert list(tmp_path.iterdir()) == []


def test_concurrent_appends_from_threads_give_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    recorder = _recorder(path)
    threads, per_thread = 8, 300
    start = threading.Barrier(threads)

    def writer(t: int) -> None:
        start.wait(timeout=10)
        for i in range(per_thread):
            # Lines of very different sizes (up to ~40 KB) make torn or interleaved writes visible.
            recorder.record(_record(t * per_thread + i, payload=str(t) * ((i * 997) % 40000)))

    pool = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=60)
    recorder.audit.close()

    records, bad = read_records(path)
    assert bad == []
    assert sorted(r["call_id"] for r in records) == sorted(f"c{n}" for n in range(threads * per_thread))
    for record in records:
        payload = record["arguments"]["payload"]
        assert payload == payload[:1] * len(payload)


def test_two_logs_on_one_file_do_not_interleave(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    first, second = _recorder(path), _recorder(path)
    for n in range(50):
        first.record(_record(n, payload="a" * 5000))
        second.record(_record(n, payload="b" * 7000))
    first.audit.close()
    second.audit.close()
    records, bad = read_records(path)
    assert (len(records), bad) == (100, [])


def test_torn_final_line_is_skipped_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    good = [json.dumps(_written(n)) for n in range(2)]
    path.write_text(good[0] + "\n" + good[1] + "\n" + good[0][: len(good[0]) // 2])
    records, bad = read_records(path)
    assert [r["call_id"] for r in records] == ["c0", "c1"]
    assert bad == [3]


def test_a_record_after_a_crash_starts_on_its_own_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_text(json.dumps(_written(0)) + "\n" + '{"time": "2026-01-01T00:0')
    recorder = _recorder(path)
    recorder.record(_record(1))
    recorder.audit.close()
    records, bad = read_records(path)
    assert [r["call_id"] for r in records] == ["c0", "c1"]
    assert bad == [2]


@pytest.mark.parametrize(
    ("content", "bad_lines"),
    [
        ('{"a": 1}\n\n{"b": 2}\n', []),  # blank lines are not records and not errors
        ('{"a": 1}\n[1, 2]\n"text"\n{"b": 2}\n', [2, 3]),  # valid JSON that is not an object
        ('{"a": 1}\n\xff\xfe garbage\n{"b": 2}', [2]),
    ],
)
def test_read_records_reports_lines_that_are_not_records(content: str, bad_lines: list[int], tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(content.encode("latin-1"))
    records, bad = read_records(path)
    assert len(records) == 2
    assert bad == bad_lines


def test_read_records_of_a_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        read_records(tmp_path / "missing.jsonl")


def _read_only_dir(tmp_path: Path) -> Path:
    """A directory where creating a file fails, even for root (who ignores mode bits)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    for candidate in (locked, Path("/sys"), Path("/proc")):
        probe = candidate / "toolrt-probe"
        try:
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT, 0o600))
        except OSError:
            return candidate
        probe.unlink()
    pytest.skip("no read-only directory available")


def _failing_paths(tmp_path: Path) -> dict[str, Path]:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    return {
        "read-only directory": _read_only_dir(tmp_path) / "audit.jsonl",
        "path is a directory": tmp_path,
        "parent is a file": blocker / "audit.jsonl",
        "disk full": Path("/dev/full"),
    }


@pytest.mark.parametrize("case", ["read-only directory", "path is a directory", "parent is a file", "disk full"])
def test_unwritable_log_never_raises_and_warns_once(
    case: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _failing_paths(tmp_path)[case]
    if case == "disk full" and not path.exists():
        pytest.skip("/dev/full is not available")
    recorder = _recorder(path)
    log = recorder.audit
    with caplog.at_level(logging.WARNING, logger="toolrt.audit"):
        for n in range(3):
            recorder.record(_record(n))
    log.close()
    warnings = [r for r in caplog.records if r.name == "toolrt.audit"]
    assert len(warnings) == 1
    assert "Cannot write the audit log" in warnings[0].getMessage()
    assert log.last_error is not None and str(path) in log.last_error


def test_a_log_that_recovers_keeps_recording(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    parent = tmp_path / "later"
    parent.write_text("in the way")  # the log's directory cannot be created yet
    recorder = _recorder(parent / "audit.jsonl")
    with caplog.at_level(logging.WARNING, logger="toolrt.audit"):
        recorder.record(_record(0))
        parent.unlink()
        recorder.record(_record(1))
    recorder.audit.close()
    records, bad = read_records(parent / "audit.jsonl")
    assert ([r["call_id"] for r in records], bad) == (["c1"], [])
    assert len([r for r in caplog.records if r.name == "toolrt.audit"]) == 1


def test_arguments_that_are_not_json_are_recorded_as_why_and_the_call_still_is(tmp_path: Path) -> None:
    recorder = _recorder(tmp_path / "audit.jsonl")
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    bad_key = _record(1)._replace(args={("tuple", "key"): 1})
    recorder.record(bad_key)
    recorder.record(_record(2)._replace(args=cyclic))
    recorder.record(_record(3))
    recorder.audit.close()
    records, bad = read_records(tmp_path / "audit.jsonl")
    assert bad == []
    assert [r["call_id"] for r in records] == ["c1", "c2", "c3"]
    not_json = "<arguments not recordable as JSON: {}>"
    key_error = "TypeError: keys must be str, int, float, bool or None, not tuple"
    assert records[0]["arguments"] == not_json.format(key_error)
    assert records[1]["arguments"] == not_json.format("ValueError: Circular reference detected")
    assert records[2]["arguments"] == {"command": "echo ✓"}
