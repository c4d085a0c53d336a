"""`rt.sessions`: a session's memory and approvals carried between Runtimes (as between processes), its
limits and release, and the Runtime's 0.2 names for them, which warn and still work for one release."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from toolrt import Reply, Runtime, Sessions, UsageError
from toolrt.permissions.ask import AskRequest

Factory = Callable[..., Path]
ASKS_FOR_EDITS = 'permission:\n  "*": allow\n  edit: ask\n'


def _project(make_project: Factory) -> Path:
    root = make_project(permissions=ASKS_FOR_EDITS, builtin_tools=True)
    (root / "notes.txt").write_text("old line\n", encoding="utf-8")
    return root


async def _always(request: AskRequest) -> Reply:
    return Reply("always")


def _edit(root: Path, old: str, new: str) -> dict[str, str]:
    return {"filePath": str(root / "notes.txt"), "oldString": old, "newString": new}


def test_a_sessions_memory_and_approvals_outlive_the_runtime_that_held_them(make_project: Factory) -> None:
    """What `toolrt call --session` does between two processes: the "always" approval lets the next Runtime
    edit without asking again, and the read stamps let it edit a file the session read."""
    root = _project(make_project)
    with Runtime.load(root) as first:
        assert first.call_sync("read", {"filePath": "notes.txt"}, session="s1").error is None
        assert first.call_sync("edit", _edit(root, "old", "new"), session="s1", ask=_always).error is None
        state = json.loads(json.dumps(first.sessions.state("s1")))
        approvals = json.loads(json.dumps(first.sessions.approvals("s1")))
    assert [permission for permission, _ in approvals] == ["edit"]

    with Runtime.load(root) as second:
        decision, _ = second.check_call("edit", _edit(root, "new", "newer"), session="s1", approvals=True)
        assert decision.action == "ask"
        denied = second.call_sync("edit", _edit(root, "new", "newer"), session="s1")  # no one to ask
        assert denied.error is not None and "needs approval (edit `notes.txt`)" in denied.error
        second.sessions.restore_approvals("s1", [(permission, pattern) for permission, pattern in approvals])
        decision, _ = second.check_call("edit", _edit(root, "new", "newer"), session="s1", approvals=True)
        assert decision.action == "allow"
        unread = second.call_sync("edit", _edit(root, "new", "newer"), session="s1")
        assert unread.error is not None and "You must read the file" in unread.error
        second.sessions.restore("s1", state)
        edited = second.call_sync("edit", _edit(root, "new", "newer"), session="s1")
        assert edited.error is None, edited.error
    assert (root / "notes.txt").read_text(encoding="utf-8") == "newer line\n"


def test_approvals_are_kept_per_agent(make_project: Factory) -> None:
    root = make_project(permissions=ASKS_FOR_EDITS, builtin_tools=True)
    rt = Runtime.load(root)
    rt.sessions.restore_approvals("s1", [("edit", "*")], agent="plan")
    assert rt.sessions.approvals("s1", "plan") == [("edit", "*")]
    assert rt.sessions.approvals("s1") == []  # the default agent's, which holds none


def test_released_sessions_are_forgotten_and_limits_are_checked(make_project: Factory) -> None:
    rt = Runtime.load(make_project(permissions=ASKS_FOR_EDITS, builtin_tools=True))
    assert isinstance(rt.sessions, Sessions) and rt.sessions is rt.sessions
    rt.sessions.restore("a", {"todos": ["x"]})
    rt.sessions.restore_approvals("a", [("edit", "*")])
    rt.sessions.begin("b")
    assert ("a" in rt.sessions, "b" in rt.sessions, len(rt.sessions)) == (True, True, 2)
    assert rt.sessions.knows("a") and not rt.sessions.knows("never-issued")
    rt.sessions.release("a")
    assert "a" not in rt.sessions and len(rt.sessions) == 1
    assert rt.sessions.state("a") == {} and rt.sessions.approvals("a") == []
    rt.sessions.limit(idle_seconds=None, max_sessions=1)
    rt.sessions.begin("c")
    assert "b" not in rt.sessions and "c" in rt.sessions  # the most idle one went
    with pytest.raises(UsageError, match="session limit must be at least 1, not 0"):
        rt.sessions.limit(idle_seconds=None, max_sessions=0)


def test_the_runtimes_old_session_names_warn_and_do_what_the_new_ones_do(make_project: Factory) -> None:
    rt = Runtime.load(make_project(permissions=ASKS_FOR_EDITS, builtin_tools=True))
    with pytest.warns(DeprecationWarning, match=r"Runtime.restore_session is deprecated: use rt.sessions.restore"):
        rt.restore_session("s", {"todos": ["x"]})
    with pytest.warns(DeprecationWarning, match=r"Runtime.session_state is deprecated: use rt.sessions.state"):
        assert rt.session_state("s") == {"todos": ["x"]}
    with pytest.warns(DeprecationWarning, match=r"restore_approvals is deprecated: use rt.sessions.restore_appr"):
        rt.restore_approvals("s", [("edit", "*")], agent="plan")
    with pytest.warns(DeprecationWarning, match=r"Runtime.approvals is deprecated: use rt.sessions.approvals"):
        assert rt.approvals("s", "plan") == [("edit", "*")]
    with pytest.warns(DeprecationWarning, match=r"Runtime.begin_session is deprecated: use rt.sessions.begin"):
        rt.begin_session("t")
    with pytest.warns(DeprecationWarning, match=r"Runtime.knows_session is deprecated: use rt.sessions.knows"):
        assert rt.knows_session("t") is True
    assert rt.sessions.state("s") == {"todos": ["x"]} and "t" in rt.sessions


def test_a_deprecation_warning_points_at_the_callers_line(make_project: Factory) -> None:
    rt = Runtime.load(make_project())
    with pytest.warns(DeprecationWarning) as warned:
        rt.session_state("s")
    assert [Path(w.filename).name for w in warned] == [Path(__file__).name]


def test_listeners_subscribe_to_calls_or_to_swaps(make_project: Factory) -> None:
    rt = Runtime.load(make_project(permissions='permission:\n  "*": allow\n'))
    kinds: list[str] = []
    swapped: list[tuple[str, ...]] = []
    stop_calls = rt.subscribe(lambda event: kinds.append(event.kind))
    stop_swaps = rt.subscribe(lambda change: swapped.append(change.added), to="swaps")
    rt.register(ECHO)
    assert rt.call_sync("echo", {}).error is None
    assert swapped == [("echo",)] and kinds[0] == "running" and kinds[-1] == "completed"
    stop_calls()
    stop_swaps()
    rt.register({**ECHO, "id": "echo2"})
    assert rt.call_sync("echo2", {}).error is None
    assert swapped == [("echo",)] and kinds.count("running") == 1
    with pytest.raises(UsageError, match=r"subscribe\(to='reloads'\): a listener subscribes to 'calls' or 'swaps'"):
        rt.subscribe(print, to="reloads")  # type: ignore[call-overload]


def test_the_old_swap_listener_name_warns_and_still_listens(make_project: Factory) -> None:
    rt = Runtime.load(make_project(permissions='permission:\n  "*": allow\n'))
    swapped: list[tuple[str, ...]] = []
    with pytest.warns(
        DeprecationWarning, match=r'Runtime.on_swap is deprecated: use rt.subscribe\(listener, to="swaps"\)'
    ):
        stop = rt.on_swap(lambda change: swapped.append(change.added))
    rt.register(ECHO)
    stop()
    rt.register({**ECHO, "id": "echo2"})
    assert swapped == [("echo",)]


def test_the_reloaders_old_listener_name_warns_and_still_listens(make_project: Factory) -> None:
    from toolrt.reload import Reloader, ReloadEvent

    root = make_project(permissions='permission:\n  "*": allow\n')
    reloader = Reloader(Runtime.load(root))
    events: list[ReloadEvent] = []
    with pytest.warns(DeprecationWarning, match=r"Reloader.on_reload is deprecated: use Reloader.subscribe"):
        stop = reloader.on_reload(events.append)
    (root / "permissions.yaml").write_text('permission:\n  "*": deny\n', encoding="utf-8")
    anyio.run(reloader.reload_once)
    stop()
    anyio.run(reloader.reload_once)
    assert [(event.change is not None and event.change.permissions_changed) for event in events] == [True]


ECHO = {
    "id": "echo",
    "description": "Say hi.",
    "parameters": {"type": "object"},
    "handler": {"argv": ["echo", "hi"]},
}
