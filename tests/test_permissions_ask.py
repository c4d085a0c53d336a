"""The ask flow: OpenCode's ask/reply tests ported to PermissionBroker, plus locked and floor cases."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from toolrt.errors import CorrectedError, DeniedError, PermissionBlocked, RejectedError, UsageError
from toolrt.permissions.ask import APPROVAL_SOURCE, AskRequest, PermissionBroker, Reply
from toolrt.permissions.model import Action, Decision, PermissionRequest, Rule
from toolrt.permissions.rules import Ruleset

NONE = Ruleset()
TIMEOUT = 20


def R(permission: str, pattern: str, action: Action) -> Rule:
    return Rule(permission, pattern, action)


def run(test: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with anyio.fail_after(TIMEOUT):
            await test()

    anyio.run(bounded)


class WaitingAsker:
    """An asker that shows each request to the test and never answers itself (a UI answers via reply())."""

    def __init__(self) -> None:
        self._send: MemoryObjectSendStream[AskRequest]
        self.received: MemoryObjectReceiveStream[AskRequest]
        self._send, self.received = anyio.create_memory_object_stream[AskRequest](10)
        self.cancelled: list[str] = []

    def close(self) -> None:
        self._send.close()
        self.received.close()

    async def __call__(self, request: AskRequest) -> Reply:
        await self._send.send(request)
        try:
            await anyio.sleep_forever()
        finally:
            self.cancelled.append(request.id)
        raise AssertionError("unreachable")


@pytest.fixture
def new_asker() -> Iterator[Callable[[], WaitingAsker]]:
    """`new_asker()` gives a WaitingAsker; each is closed after the test."""
    made: list[WaitingAsker] = []

    def make() -> WaitingAsker:
        made.append(WaitingAsker())
        return made[-1]

    yield make
    for asker in made:
        asker.close()


def replying(kind: str, message: str | None = None) -> Callable[[AskRequest], Awaitable[Reply]]:
    async def asker(request: AskRequest) -> Reply:
        return Reply(kind, message)  # type: ignore[arg-type]

    return asker


async def authorize(
    broker: PermissionBroker,
    permission: str,
    patterns: tuple[str, ...],
    *,
    session: str = "s1",
    agent: str = "build",
    always: tuple[str, ...] = (),
    rules: tuple[Rule, ...] = (),
    locked: tuple[Rule, ...] = (),
    asker: Any = None,
    **extra: Any,
) -> Decision:
    request = PermissionRequest(permission, patterns, always, metadata=extra.pop("metadata", {}))
    return await broker.authorize(
        [request],
        ruleset=Ruleset(rules),
        locked=Ruleset(locked),
        session=session,
        agent=agent,
        asker=asker,
        **extra,
    )


class Outcome:
    """What a background authorize ended with."""

    def __init__(self) -> None:
        self.decision: Decision | None = None
        self.error: PermissionBlocked | None = None
        self.done = anyio.Event()


def background(group: anyio.abc.TaskGroup, call: Callable[[], Awaitable[Decision]]) -> Outcome:
    outcome = Outcome()

    async def runner() -> None:
        try:
            outcome.decision = await call()
        except PermissionBlocked as error:
            outcome.error = error
        finally:
            outcome.done.set()

    group.start_soon(runner)
    return outcome


def test_allow_resolves_without_asking() -> None:
    async def body() -> None:
        decision = await authorize(PermissionBroker(), "bash", ("ls",), rules=(R("bash", "*", "allow"),))
        assert decision.action == "allow"

    run(body)


def test_deny_raises_denied_error_naming_the_rule() -> None:
    async def body() -> None:
        with pytest.raises(DeniedError, match=r'(?s)^The user has specified a rule.*bash: "\*": deny'):
            await authorize(PermissionBroker(), "bash", ("rm -rf /",), rules=(R("bash", "*", "deny"),))

    run(body)


def test_ask_without_asker_is_denied_saying_approval_was_required() -> None:
    async def body() -> None:
        with pytest.raises(DeniedError, match=r"^This call needs approval \(bash `ls`\) but no one is available"):
            await authorize(PermissionBroker(), "bash", ("ls",))

    run(body)


def test_a_deny_is_never_asked(new_asker: Callable[[], WaitingAsker]) -> None:
    async def body() -> None:
        asker = new_asker()
        rules = (R("bash", "echo *", "ask"), R("bash", "rm *", "deny"))
        broker = PermissionBroker()
        with pytest.raises(DeniedError, match=r"rm -rf /"):
            await authorize(broker, "bash", ("echo hello", "rm -rf /"), rules=rules, asker=asker)
        assert broker.pending("s1") == ()

    run(body)


def test_pending_request_holds_what_the_person_needs(new_asker: Callable[[], WaitingAsker]) -> None:
    async def body() -> None:
        broker = PermissionBroker()
        asker = new_asker()
        allow = R("bash", "echo *", "allow")
        async with anyio.create_task_group() as group:
            outcome = background(
                group,
                lambda: authorize(
                    broker,
                    "bash",
                    ("echo hi", "ls"),
                    always=("ls *",),
                    rules=(allow,),
                    asker=asker,
                    tool="bash",
                    call_id="call_1",
                    title="List files",
                    message="Runs `ls` in the project",
                    metadata={"cmd": "ls"},
                ),
            )
            request = await asker.received.receive()
            assert broker.pending("s1") == (request,)
            assert broker.pending("other") == ()
            assert (request.session, request.tool, request.call_id) == ("s1", "bash", "call_1")
            assert (request.title, request.message, dict(request.metadata)) == (
                "List files",
                "Runs `ls` in the project",
                {"cmd": "ls"},
            )
            assert [(d.pattern, d.action, d.rule) for d in request.pending] == [("ls", "ask", None)]
            assert request.requests[0].always == ("ls *",)
            broker.reply(request.id, Reply("once"))
            await outcome.done.wait()
        assert outcome.decision is not None and outcome.decision.action == "allow"
        assert asker.cancelled == [request.id]
        assert broker.pending("s1") == ()

    run(body)


@pytest.mark.parametrize(
    ("reply", "error", "message"),
    [
        (Reply("reject"), RejectedError, r"^The user rejected permission to use this specific tool call\.$"),
        (
            Reply("reject", "Use a safer command"),
            CorrectedError,
            r"^The user rejected permission to use this specific tool call with the following feedback: "
            r"Use a safer command$",
        ),
    ],
)
def test_reject_raises(reply: Reply, error: type[PermissionBlocked], message: str) -> None:
    async def body() -> None:
        with pytest.raises(error, match=message):
            await authorize(PermissionBroker(), "bash", ("ls",), asker=replying(reply.kind, reply.message))

    run(body)


def test_once_allows_this_call_only() -> None:
    async def body() -> None:
        broker = PermissionBroker()
        decision = await authorize(broker, "bash", ("ls",), always=("ls *",), asker=replying("once"))
        assert decision.action == "allow"
        assert [d.action for d in decision.decisions] == ["ask"]
        assert broker.approved("s1", "build") == Ruleset()
        with pytest.raises(DeniedError, match="needs approval"):
            await authorize(broker, "bash", ("ls",))

    run(body)


def test_always_adds_session_approvals_for_the_always_patterns() -> None:
    async def body() -> None:
        broker = PermissionBroker()
        await authorize(broker, "bash", ("git status",), always=("git status *",), asker=replying("always"))
        assert broker.approved("s1", "build").rules == (
            Rule("bash", "git status *", "allow", source=APPROVAL_SOURCE, layer="approved"),
        )
        # later calls of the session run without asking; other patterns still ask
        assert (await authorize(broker, "bash", ("git status -s",))).action == "allow"
        with pytest.raises(DeniedError, match="needs approval"):
            await authorize(broker, "bash", ("git push",))
        # approvals belong to the session (OpenCode shares them project-wide; toolrt does not)
        with pytest.raises(DeniedError, match="needs approval"):
            await authorize(broker, "bash", ("git status",), session="s2")

    run(body)


def test_always_resolves_other_pending_asks_now_allowed_and_cancels_their_asker(
    new_asker: Callable[[], WaitingAsker],
) -> None:
    async def body() -> None:
        broker = PermissionBroker()
        asker = new_asker()
        async with anyio.create_task_group() as group:
            first = background(group, lambda: authorize(broker, "bash", ("ls",), always=("ls",), asker=asker))
            a = await asker.received.receive()
            second = background(group, lambda: authorize(broker, "bash", ("ls",), asker=asker))
            b = await asker.received.receive()
            third = background(group, lambda: authorize(broker, "edit", ("x.py",), asker=asker))
            c = await asker.received.receive()
            other = background(group, lambda: authorize(broker, "bash", ("ls",), session="s2", asker=asker))
            d = await asker.received.receive()
            assert broker.pending("s1") == (a, b, c)
            broker.reply(a.id, Reply("always"))
            await first.done.wait()
            await second.done.wait()
            assert first.error is None and second.error is None
            assert broker.pending("s1") == (c,)
            assert broker.pending("s2") == (d,)
            assert sorted(asker.cancelled) == sorted([a.id, b.id])
            broker.reply(c.id, Reply("reject"))
            broker.reply(d.id, Reply("reject"))
        assert isinstance(third.error, RejectedError) and isinstance(other.error, RejectedError)

    run(body)


def test_reject_with_feedback_rejects_every_other_pending_ask_of_the_session(
    new_asker: Callable[[], WaitingAsker],
) -> None:
    async def body() -> None:
        broker = PermissionBroker()
        asker = new_asker()
        async with anyio.create_task_group() as group:
            first = background(group, lambda: authorize(broker, "bash", ("ls",), asker=asker))
            a = await asker.received.receive()
            second = background(group, lambda: authorize(broker, "edit", ("foo.ts",), asker=asker))
            await asker.received.receive()
            other = background(group, lambda: authorize(broker, "bash", ("ls",), session="s2", asker=asker))
            d = await asker.received.receive()
            broker.reply(a.id, Reply("reject", "use rg instead"))
            await first.done.wait()
            await second.done.wait()
            assert isinstance(first.error, CorrectedError) and first.error.feedback == "use rg instead"
            assert type(second.error) is RejectedError
            assert broker.pending("s2") == (d,)
            broker.reply(d.id, Reply("once"))
        assert other.decision is not None and other.decision.action == "allow"

    run(body)


def test_always_does_not_resolve_asks_held_by_the_locked_layer(new_asker: Callable[[], WaitingAsker]) -> None:
    async def body() -> None:
        broker = PermissionBroker()
        asker = new_asker()
        locked = (R("bash", "git push*", "ask"),)
        async with anyio.create_task_group() as group:
            background(group, lambda: authorize(broker, "bash", ("git push",), always=("git *",), asker=asker))
            a = await asker.received.receive()
            held = background(group, lambda: authorize(broker, "bash", ("git push",), locked=locked, asker=asker))
            b = await asker.received.receive()
            broker.reply(a.id, Reply("always"))
            assert broker.pending("s1") == (b,)
            broker.reply(b.id, Reply("once"))
            await held.done.wait()
        assert held.decision is not None and held.decision.decisions[0].rule == locked[0]

    run(body)


def test_reply_to_an_unknown_request_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r'^no pending permission request "perm_404"; pending requests: none$'):
        PermissionBroker().reply("perm_404", Reply("once"))


def test_a_failing_asker_propagates_and_leaves_nothing_pending() -> None:
    async def body() -> None:
        broker = PermissionBroker()

        async def broken(request: AskRequest) -> Reply:
            raise OSError("terminal closed")

        with pytest.raises(OSError, match="terminal closed"):
            await authorize(broker, "bash", ("ls",), asker=broken)
        assert broker.pending("s1") == ()

    run(body)


def test_cancelling_the_call_withdraws_its_ask(new_asker: Callable[[], WaitingAsker]) -> None:
    async def body() -> None:
        broker = PermissionBroker()
        asker = new_asker()
        async with anyio.create_task_group() as group:
            outcome = background(group, lambda: authorize(broker, "bash", ("ls",), asker=asker))
            request = await asker.received.receive()
            group.cancel_scope.cancel()
        assert outcome.decision is None and outcome.error is None
        assert broker.pending("s1") == ()
        assert asker.cancelled == [request.id]
        with pytest.raises(UsageError, match="no pending permission request"):
            broker.reply(request.id, Reply("once"))

    run(body)
