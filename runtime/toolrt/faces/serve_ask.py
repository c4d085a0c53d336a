"""Asking the person behind an MCP client (`toolrt serve`): a call's approval, the `question` tool's
questions and the model's held config changes, as elicitation forms (`elicitation/create` on
handshake-era versions, an input-required result on 2026-07-28, `serve_client`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..api import Runtime
from ..call.client import ClientRequest
from ..errors import UsageError
from ..permissions.ask import AskRequest, Reply
from ..permissions.shown import ask_lines, escape_controls
from .serve_client import McpChannel, RequestContext

_DECISIONS = ("once", "always", "reject")
_TRUST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Approve this change and load it"}},
    "required": ["approve"],
}

_ASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Allow this tool call?",
            "enum": list(_DECISIONS),
            "enumNames": ["Allow once", "Always allow (this session)", "Reject"],
        },
        "feedback": {"type": "string", "title": "Feedback for the model (when rejecting)"},
    },
    "required": ["decision"],
}


def can_ask(ctx: RequestContext) -> bool:
    """Whether toolrt can ask this client's person: it declared elicitation, and the request can carry
    a request to it (a server request on handshake-era versions, an input-required result on 2026-07-28)."""
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.elicitation is None:
        return False
    return ctx.session.can_send_request or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def asker(ctx: RequestContext, channel: McpChannel) -> Callable[[AskRequest], Any] | None:
    """How to ask this client's person: an elicitation form (`elicitation/create` on handshake-era
    versions, an input-required result on 2026-07-28) showing what "always" would keep; None when
    toolrt cannot ask it (no elicitation declared). `tools/list` leaves out the tools that only ask
    for such a client."""
    if not can_ask(ctx):
        return None
    asked = itertools.count(1)

    async def ask(request: AskRequest) -> Reply:
        key = f"toolrt_approval_{next(asked)}"
        form = ClientRequest(
            "elicitation/create", {"mode": "form", "message": ask_text(request), "requestedSchema": _ASK_SCHEMA}
        )
        answer = (await channel.request({key: form})).get(key) or {}
        content = answer.get("content") or {}
        decision = content.get("decision")
        if answer.get("action") != "accept" or decision not in _DECISIONS:
            return Reply("reject")
        feedback = content.get("feedback")
        if decision == "reject":
            return Reply("reject", feedback if isinstance(feedback, str) and feedback.strip() else None)
        return Reply("once" if decision == "once" else "always")

    return ask


async def review_held(rt: Runtime, ctx: RequestContext, not_approved: set[tuple[str, str]]) -> None:
    """Before a call, when the config holds changes the model made (`toolrt.attribution`) and the client
    can put a form to the person: each change, with its diff, once; an approved one loads now."""
    if not rt.snapshot.held or not can_ask(ctx) or not ctx.session.can_send_request:
        return  # 2026-07-28 (no server requests): `toolrt trust` approves them
    from .trust import change_text

    for hold in await anyio.to_thread.run_sync(rt.held):
        if (str(hold.path), hold.digest) in not_approved:
            continue
        text = escape_controls(
            "The model changed this config, which is not loaded until you approve it:\n" + change_text(rt, hold),
            keep_newlines=True,
        )
        result = await ctx.session.elicit_form(text, _TRUST_SCHEMA, related_request_id=ctx.request_id)
        if result.action == "accept" and (result.content or {}).get("approve") is True:
            try:
                await anyio.to_thread.run_sync(rt.approve, hold)
                continue
            except UsageError:
                pass  # changed since it was shown: asked again with the new content next time
        not_approved.add((str(hold.path), hold.digest))


def questioner(ctx: RequestContext, channel: McpChannel) -> Callable[[Sequence[Mapping[str, Any]]], Any] | None:
    """The `question` tool's questions as elicitation forms, one per question, in one round; None
    without elicitation."""
    if not can_ask(ctx):
        return None
    rounds = itertools.count(1)

    async def questioner(questions: Sequence[Mapping[str, Any]]) -> list[list[str]]:
        n = next(rounds)
        forms = {
            f"toolrt_question_{n}_{i}": ClientRequest(
                "elicitation/create",
                {
                    "mode": "form",
                    "message": escape_controls(str(item["question"]), keep_newlines=True),
                    "requestedSchema": question_schema(item),
                },
            )
            for i, item in enumerate(questions, 1)
        }
        answers = await channel.request(forms)
        found: list[list[str]] = []
        for key, item in zip(forms, questions, strict=True):
            answer = answers.get(key) or {}
            value = (answer.get("content") or {}).get("answer") if answer.get("action") == "accept" else None
            found.append(answer_list(value, multiple=bool(item.get("multiple"))))
        return found

    return questioner


def question_schema(item: Mapping[str, Any]) -> dict[str, Any]:
    """A one-field form: the option labels to pick from (or, for several answers, text to type)."""
    labels = [str(option.get("label", "")) for option in item.get("options", ()) if option.get("label")]
    title = escape_controls(str(item.get("header") or item["question"]))
    if labels and not item.get("multiple"):
        answer: dict[str, Any] = {"type": "string", "title": title, "enum": labels}
    else:
        hint = f" (one or more of: {escape_controls(', '.join(labels))}; comma-separated)" if labels else ""
        answer = {"type": "string", "title": title + hint}
    return {"type": "object", "properties": {"answer": answer}, "required": ["answer"]}


def answer_list(answer: Any, *, multiple: bool) -> list[str]:
    if not isinstance(answer, str) or not answer.strip():
        return []
    return [part.strip() for part in answer.split(",") if part.strip()] if multiple else [answer.strip()]


def ask_text(request: AskRequest) -> str:
    return "\n".join(ask_lines(request))
