from __future__ import annotations

import contextlib
import os
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolrt.config.settings import is_secret_name
from toolrt.errors import ToolFailure
from toolrt.execute import DEFAULT_ENV_ALLOW, ProcessOutcome, build_env, run_process

ENV = build_env()


def run(argv: Sequence[str], *, cwd: Path | None = None, timeout: float | None = 10, **kwargs: Any) -> ProcessOutcome:
    async def main() -> ProcessOutcome:
        return await run_process(argv, cwd=cwd or Path.cwd(), env=kwargs.pop("env", ENV), timeout=timeout, **kwargs)

    return anyio.run(main)


def _gone(pid: int) -> bool:
    """Dead: no such process, or only a zombie left for a parent (or a non-reaping init) to collect."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def wait_gone(pids: Sequence[int], within: float = 20.0) -> list[int]:
    """The pids still alive after `within` seconds of waiting for them to die."""
    deadline = time.monotonic() + within
    alive = [p for p in pids if not _gone(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.01)
        alive = [p for p in alive if not _gone(p)]
    return alive


class PidCollector:
    """An `on_output` that gathers the pids a script echoes and fires once `expected` have arrived."""

    def __init__(self, expected: int, then: Callable[[], None] = lambda: None) -> None:
        self.text = ""
        self.expected = expected
        self.then = then
        self.fired = False

    def __call__(self, text: str) -> None:
        self.text += text
        if not self.fired and len(self.pids) >= self.expected:
            self.fired = True
            self.then()

    @property
    def pids(self) -> list[int]:
        return [int(w) for w in self.text.split() if w.isdigit()]


@pytest.mark.parametrize(
    ("argv", "output", "exit_code"),
    [
        (["sh", "-c", "echo out; echo err >&2; echo out2; echo err2 >&2"], "out\nerr\nout2\nerr2\n", 0),
        (["sh", "-c", "printf partial; exit 3"], "partial", 3),
        (["sh", "-c", "echo before >&2; kill -9 $$"], "before\n", -9),
        (["true"], "", 0),
        (["false"], "", 1),
        (["printf", "%s|%s", "a b", "c"], "a b|c", 0),
    ],
)
def test_output_interleaved_and_exit_code(argv: list[str], output: str, exit_code: int) -> None:
    outcome = run(argv)
    assert (outcome.output, outcome.exit_code, outcome.timed_out, outcome.aborted) == (output, exit_code, False, False)
    assert outcome.total_bytes == len(output.encode())
    assert outcome.spill_path is None
    assert outcome.duration > 0


@pytest.mark.parametrize(
    ("stdin", "expected"),
    [
        (None, ""),  # stdin is /dev/null, so cat ends at once instead of waiting for input
        (b"hello", "hello"),
        (b"x" * 3_000_000, "x" * 3_000_000),  # larger than a pipe buffer: fed while output is read
    ],
)
def test_stdin(stdin: bytes | None, expected: str) -> None:
    outcome = run(["cat"], stdin=stdin, memory_cap=4_000_000)
    assert outcome.output == expected


def test_stdin_the_child_never_reads_is_not_an_error() -> None:
    outcome = run(["sh", "-c", "exec 0<&-; echo done"], stdin=b"y" * 1_000_000)
    assert (outcome.output, outcome.exit_code) == ("done\n", 0)


def test_cwd_and_env(tmp_path: Path) -> None:
    env = build_env(["PATH"], set={"GREETING": "hi there"})
    outcome = run(["sh", "-c", 'pwd; echo "$GREETING"; echo "${HOME-unset}"'], cwd=tmp_path, env=env)
    assert outcome.output == f"{tmp_path}\nhi there\nunset\n"


@pytest.mark.parametrize(
    ("allow", "source", "expected"),
    [
        (DEFAULT_ENV_ALLOW, {"PATH": "/bin", "OPENAI_API_KEY": "sk", "LC_ALL": "C", "PWD": "/x"}, {"PATH", "LC_ALL"}),
        (["LC_*"], {"LC_ALL": "C", "LC_SECRET_TOKEN": "t"}, {"LC_ALL"}),
        (["*"], {"A": "1", "GITHUB_TOKEN": "t", "AWS_REGION": "r", "DB_PASSWORD": "p", "SSH_KEY": "k"}, {"A"}),
        (["MY_*"], {"MY_API_KEY": "k", "MY_CREDENTIALS": "c", "MY_NAME": "n", "my_secret": "s"}, {"MY_NAME"}),
        (["GITHUB_TOKEN", "GH_*"], {"GITHUB_TOKEN": "t", "GH_TOKEN": "t2"}, {"GITHUB_TOKEN"}),  # exact name passes
        ([], {"PATH": "/bin"}, set()),
    ],
)
def test_build_env_allow_list(allow: Sequence[str], source: dict[str, str], expected: set[str]) -> None:
    assert set(build_env(allow, source=source)) == expected


def test_build_env_set_wins_and_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    env = build_env(set={"TZ": "Europe/Paris"})
    assert env["TZ"] == "Europe/Paris"
    assert "ANTHROPIC_API_KEY" not in env
    assert is_secret_name("anthropic_api_key")


TREES = {
    # the leader waits for two background sleepers
    "waiting shell": "echo $$; sleep 100 & echo $!; sleep 100 & echo $!; wait",
    # everybody ignores SIGTERM, so only the SIGKILL after the grace period ends them
    "ignores SIGTERM": "trap '' TERM; echo $$; sleep 100 & echo $!; sleep 100 & echo $!; wait",
    # the leader exits at once, a grandchild keeps the output pipe open
    "orphan holds the pipe": "sleep 100 & echo $!",
    # a nested shell with its own children
    "nested": "echo $$; sh -c 'echo $$; sleep 100 & echo $!; wait' & echo $!; wait",
}


@pytest.mark.parametrize("script", TREES.values(), ids=TREES.keys())
def test_timeout_kills_the_whole_tree(script: str) -> None:
    pids = PidCollector(expected=1)
    outcome = run(["sh", "-c", script], timeout=0.5, on_output=pids, kill_grace=0.1)
    assert (outcome.timed_out, outcome.aborted, outcome.exit_code) == (True, False, None)
    assert pids.pids and wait_gone(pids.pids) == []


def test_abort_kills_the_tree() -> None:
    async def main() -> tuple[ProcessOutcome, list[int]]:
        abort = anyio.Event()
        pids = PidCollector(expected=3, then=abort.set)
        outcome = await run_process(
            ["sh", "-c", TREES["waiting shell"]], cwd=Path.cwd(), env=ENV, timeout=30, abort=abort, on_output=pids
        )
        return outcome, pids.pids

    outcome, pids = anyio.run(main)
    assert (outcome.aborted, outcome.timed_out, outcome.exit_code) == (True, False, None)
    assert outcome.duration < 10
    assert len(pids) == 3 and wait_gone(pids) == []


def test_abort_set_before_start_runs_nothing(tmp_path: Path) -> None:
    async def main() -> ProcessOutcome:
        abort = anyio.Event()
        abort.set()
        return await run_process(["touch", "canary"], cwd=tmp_path, env=ENV, timeout=5, abort=abort)

    outcome = anyio.run(main)
    assert (outcome.aborted, outcome.exit_code, outcome.output) == (True, None, "")
    assert not (tmp_path / "canary").exists()


def test_cancellation_kills_the_tree_and_propagates() -> None:
    reached_after = False

    async def main() -> tuple[bool, list[int]]:
        nonlocal reached_after
        with anyio.CancelScope() as scope:
            pids = PidCollector(expected=3, then=scope.cancel)
            argv = ["sh", "-c", TREES["ignores SIGTERM"]]
            await run_process(argv, cwd=Path.cwd(), env=ENV, timeout=None, on_output=pids, kill_grace=0.1)
            reached_after = True
        return scope.cancelled_caught, pids.pids

    cancelled, pids = anyio.run(main)
    assert cancelled and not reached_after
    assert len(pids) == 3 and wait_gone(pids) == []


def test_a_failing_output_callback_kills_the_tree_and_propagates() -> None:
    def explode() -> None:
        raise RuntimeError("listener broke")

    pids = PidCollector(expected=3, then=explode)
    with pytest.raises(RuntimeError, match="listener broke"):
        run(["sh", "-c", TREES["waiting shell"]], timeout=30, on_output=pids)
    assert wait_gone(pids.pids) == []


def test_on_stdout_takes_stdout_apart_from_stderr_and_may_stop_the_whole_tree() -> None:
    """The one runner also serves a streaming consumer (ripgrep's records): stdout goes to it chunk by
    chunk, stderr stays the outcome's output, and a False from it stops the process group."""
    chunks: list[bytes] = []

    def keep(chunk: bytes) -> bool:
        chunks.append(chunk)
        return True

    outcome = run(["sh", "-c", "echo out; echo err >&2; echo out2"], on_stdout=keep)
    assert (b"".join(chunks), outcome.output, outcome.exit_code, outcome.stopped) == (b"out\nout2\n", "err\n", 0, False)

    seen = bytearray()

    def take(chunk: bytes) -> bool:
        seen.extend(chunk)
        return len(seen.split()) < 3  # stop once the shell and both children have said their pids

    script = "sleep 60 & echo $!; sleep 60 & echo $!; echo $$; while :; do sleep 60; done"
    outcome = run(["sh", "-c", script], timeout=30, on_stdout=take, kill_grace=0.0)
    assert (outcome.stopped, outcome.timed_out, outcome.aborted, outcome.exit_code) == (True, False, False, None)
    assert outcome.duration < 10
    pids = [int(word) for word in seen.split()]
    assert len(pids) == 3 and wait_gone(pids) == []


def test_live_output_matches_the_final_output() -> None:
    chunks: list[str] = []
    outcome = run(["sh", "-c", "seq 1 50000; echo done >&2"], on_output=chunks.append)
    assert "".join(chunks) == outcome.output
    assert outcome.output.endswith("50000\ndone\n")


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (r"printf '\377abc\300'", "\ufffdabc\ufffd"),
        (r"printf '\303\251 ok \342\202'", "é ok \ufffd"),  # truncated 3-byte sequence at the very end
        (r"printf 'a\355\240\200b'", "a\ufffd\ufffd\ufffdb"),  # an encoded surrogate is invalid UTF-8
    ],
)
def test_invalid_utf8_becomes_replacement_characters(script: str, expected: str) -> None:
    chunks: list[str] = []
    outcome = run(["sh", "-c", script], on_output=chunks.append)
    assert outcome.output == expected
    assert "".join(chunks) == expected


def test_a_character_split_across_reads_arrives_whole(tmp_path: Path) -> None:
    go = tmp_path / "go"
    child = (
        "import os, sys, time, pathlib\n"
        "go = pathlib.Path(sys.argv[1])\n"
        "os.write(1, b'a\\xc3')\n"  # the first byte of 'é' only
        "deadline = time.monotonic() + 10\n"
        "while not go.exists() and time.monotonic() < deadline:\n"
        "    time.sleep(0.002)\n"
        "os.write(1, b'\\xa9b')\n"
    )
    chunks: list[str] = []

    def on_output(text: str) -> None:
        chunks.append(text)
        go.touch()  # the first read has been decoded: now let the child send the rest

    outcome = run([sys.executable, "-c", child, str(go)], on_output=on_output)
    assert chunks == ["a", "éb"]
    assert outcome.output == "aéb"


def test_over_the_cap_keeps_head_and_tail_and_spills_everything(tmp_path: Path) -> None:
    expected = "".join(f"{i}\n" for i in range(1, 20001)).encode()
    outcome = run(["seq", "1", "20000"], spill_dir=tmp_path / "out", memory_cap=4096)
    assert outcome.spill_path is not None and outcome.spill_path.parent == tmp_path / "out"
    assert outcome.spill_path.name.startswith("tool_")
    assert outcome.spill_path.read_bytes() == expected
    assert outcome.total_bytes == len(expected)
    omitted = len(expected) - 4096
    assert outcome.output == (
        expected[:2048].decode()
        + f"\n\n...{omitted} bytes omitted (full output saved to {outcome.spill_path})...\n\n"
        + expected[-2048:].decode()
    )


def test_cap_boundaries_never_cut_a_character_in_two() -> None:
    outcome = run(["sh", "-c", "printf '%s' " + "é" * 100], memory_cap=11)
    # head: 5 bytes hold two whole 'é'; tail: 6 bytes hold three; the rest is counted as omitted.
    assert outcome.output == "éé\n\n...190 bytes omitted...\n\nééé"
    assert "\ufffd" not in outcome.output


def test_without_a_spill_dir_the_middle_is_dropped() -> None:
    outcome = run(["seq", "1", "2000"], memory_cap=100)
    assert outcome.spill_path is None
    assert "bytes omitted..." in outcome.output and "saved" not in outcome.output


def test_an_unwritable_spill_dir_degrades_to_head_and_tail(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    outcome = run(["seq", "1", "2000"], spill_dir=blocker / "out", memory_cap=100)
    assert outcome.spill_path is None
    assert outcome.output.startswith("1\n2\n") and outcome.output.endswith("1999\n2000\n")


@pytest.mark.slow
def test_100_mb_of_output_stays_within_bounded_memory(tmp_path: Path) -> None:
    size = 100_000_000
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        outcome = run(["sh", "-c", f"head -c {size} /dev/zero | tr '\\0' a"], spill_dir=tmp_path, timeout=120)
        peak = tracemalloc.get_traced_memory()[1] - baseline
    finally:
        tracemalloc.stop()
    assert peak < 16 * (1 << 20), f"peak heap growth {peak / (1 << 20):.1f} MiB"
    assert (outcome.exit_code, outcome.total_bytes) == (0, size)
    assert outcome.spill_path is not None and outcome.spill_path.stat().st_size == size
    half = 1 << 19
    assert outcome.output.startswith("a" * half + "\n\n...")
    assert outcome.output.endswith("...\n\n" + "a" * half)
    assert f"...{size - 2 * half} bytes omitted" in outcome.output


@pytest.mark.parametrize(
    ("argv", "cwd", "message"),
    [
        (["definitely-not-a-command-4821"], None, r"Command not found: 'definitely-not-a-command-4821'\. Check"),
        (["/nonexistent/bin/tool"], None, r"Command not found: '/nonexistent/bin/tool'"),
        (["{plain}"], None, r"Permission denied running '.*plain': it is not an executable file\."),
        (["true"], "missing", r"Working directory does not exist or is not a directory: '.*missing'\."),
        (["printf", "%s", "a\0b"], None, r"Argument 2 contains a NUL byte"),
        (["a\0b"], None, r"Argument 0 contains a NUL byte"),
        ([], None, r"Cannot run an empty command"),
        (["printf", "%s", "x" * 1_000_000], None, r"Argument list too long \(1000008 characters\) for 'printf'"),
        (["printf", "%s", "\ud800"], None, r"Could not start 'printf': .*surrogates not allowed"),
    ],
)
def test_commands_that_cannot_start_raise_tool_failure(
    argv: list[str], cwd: str | None, message: str, tmp_path: Path
) -> None:
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\necho never\n")
    plain.chmod(0o644)
    argv = [a.replace("{plain}", str(plain)) for a in argv]
    with pytest.raises(ToolFailure, match=message):
        run(argv, cwd=tmp_path / cwd if cwd else tmp_path)


@pytest.mark.parametrize("cap", [1, 2, 3])
def test_tiny_caps_still_account_for_every_byte(cap: int) -> None:
    outcome = run(["printf", "abcdef"], memory_cap=cap)
    head, tail = "abcdef"[: cap // 2], "abcdef"[len("abcdef") - (cap - cap // 2) :]
    assert outcome.output == f"{head}\n\n...{6 - len(head) - len(tail)} bytes omitted...\n\n{tail}"


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="PidfdProcess needs Linux pidfd")
def test_closing_stdin_early_closes_its_descriptor_once_so_a_reused_number_survives_aclose() -> None:
    """A process whose stdin was closed early (EOF for the child) must not close that descriptor number
    again in `aclose`: by then another file may hold the number, and closing it would cut that file."""
    import subprocess

    from toolrt.execute.spawn import PidfdProcess

    async def scenario() -> str:
        popen = subprocess.Popen(
            ["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True
        )
        process = PidfdProcess(popen)
        assert process.stdin is not None
        stdin_number = popen.stdin.fileno() if popen.stdin is not None else -1
        await process.stdin.aclose()  # EOF: cat exits
        read_end, write_end = os.pipe()  # the lowest free numbers: one of them is stdin's old number
        try:
            assert stdin_number in (read_end, write_end)
            await process.aclose()
            os.write(write_end, b"still open")
            return os.read(read_end, 64).decode()
        finally:
            for fd in (read_end, write_end):
                with contextlib.suppress(OSError):
                    os.close(fd)

    assert anyio.run(scenario) == "still open"
