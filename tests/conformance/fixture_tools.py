"""Handlers of the conformance suite's fixture tools: each does what its scenario asks, through `ctx`."""

from __future__ import annotations

import json
from typing import Any

import anyio

from toolrt import ProtocolError, ToolContext
from toolrt.errors import ToolFailure

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="


def simple_text(args: dict[str, Any], ctx: ToolContext) -> str:
    return "This is a simple text response for testing."


def image_content(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return {"output": "", "attachments": [{"mime": "image/png", "url": f"data:image/png;base64,{PNG}"}]}


def audio_content(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return {"output": "", "attachments": [{"mime": "audio/wav", "url": f"data:audio/wav;base64,{WAV}"}]}


def embedded_resource(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    resource = {
        "uri": "test://embedded-resource",
        "mime": "text/plain",
        "text": "This is an embedded resource content.",
    }
    return {"output": "", "attachments": [resource]}


def multiple_content_types(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    image = {"mime": "image/png", "url": f"data:image/png;base64,{PNG}"}
    resource = {
        "uri": "test://mixed-content-resource",
        "mime": "application/json",
        "text": '{"test":"data","value":123}',
    }
    return {"output": "Multiple content types test:", "attachments": [image, resource]}


async def with_logging(args: dict[str, Any], ctx: ToolContext) -> str:
    ctx.log("info", "Tool execution started")
    await anyio.sleep(0.05)
    ctx.log("info", "Tool processing data")
    await anyio.sleep(0.05)
    ctx.log("info", "Tool execution completed")
    return "Logging test completed"


def error_handling(args: dict[str, Any], ctx: ToolContext) -> str:
    raise ToolFailure("This tool intentionally returns an error for testing")


async def with_progress(args: dict[str, Any], ctx: ToolContext) -> str:
    for step in (0, 50, 100):
        ctx.progress(step, 100)
        if step < 100:
            await anyio.sleep(0.05)
    return "Progress test completed"


async def sampling(args: dict[str, Any], ctx: ToolContext) -> str:
    answer = await ctx.sample([args["prompt"]], 100)
    content = answer.get("content") or {}
    return f"LLM response: {content.get('text', '') if isinstance(content, dict) else content}"


async def elicitation(args: dict[str, Any], ctx: ToolContext) -> str:
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    answer = await ctx.elicit(args["message"], schema)
    return f"User response: action={answer.action}, content={json.dumps(answer.content)}"


async def elicitation_defaults(args: dict[str, Any], ctx: ToolContext) -> str:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
        },
    }
    answer = await ctx.elicit("Please review your profile", schema)
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"


async def elicitation_enums(args: dict[str, Any], ctx: ToolContext) -> str:
    titled = [{"const": f"value{n}", "title": title} for n, title in ((1, "First"), (2, "Second"), (3, "Third"))]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {
                "type": "string",
                "oneOf": [{"const": t["const"], "title": f"{t['title']} Option"} for t in titled],
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {
                "type": "array",
                "items": {"anyOf": [{"const": t["const"], "title": f"{t['title']} Choice"} for t in titled]},
            },
        },
    }
    answer = await ctx.elicit("Choose your options", schema)
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"


def json_schema(args: dict[str, Any], ctx: ToolContext) -> str:
    return f"Received: {json.dumps(args, sort_keys=True)}"


async def missing_capability(args: dict[str, Any], ctx: ToolContext) -> str:
    answer = await ctx.sample(["Say hello"], 20)  # -32021 when the client did not declare sampling
    return json.dumps(answer)


def _name_form(message: str, field: str = "name") -> Any:
    schema = {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}
    return ToolContext.elicit_request(message, schema)


async def ir_elicitation(args: dict[str, Any], ctx: ToolContext) -> str:
    answer = (await ctx.ask_client({"user_name": _name_form("What is your name?")}))["user_name"]
    return f"Hello, {(answer.content or {}).get('name', 'stranger')}!"


async def ir_sampling(args: dict[str, Any], ctx: ToolContext) -> str:
    request = ctx.sample_request(["What is the capital of France?"], 100)
    answer = (await ctx.ask_client({"capital_question": request}))["capital_question"]
    return f"The model said: {answer.get('content', {}).get('text', '')}"


async def ir_list_roots(args: dict[str, Any], ctx: ToolContext) -> str:
    roots = (await ctx.ask_client({"client_roots": ctx.roots_request()}))["client_roots"]
    return "Client roots: " + ", ".join(str(root.get("uri")) for root in roots)


async def ir_request_state(args: dict[str, Any], ctx: ToolContext) -> str:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    answer = (await ctx.ask_client({"confirm": ctx.elicit_request("Please confirm", schema)}))["confirm"]
    return f"state-ok: confirmed={(answer.content or {}).get('ok')}"


async def ir_multiple_inputs(args: dict[str, Any], ctx: ToolContext) -> str:
    answers = await ctx.ask_client(
        {
            "user_name": _name_form("What is your name?"),
            "greeting": ctx.sample_request(["Generate a greeting"], 50),
            "client_roots": ctx.roots_request(),
        }
    )
    name = (answers["user_name"].content or {}).get("name")
    greeting = answers["greeting"].get("content", {}).get("text")
    return f"name={name}, greeting={greeting}, roots={len(answers['client_roots'])}"


async def ir_multi_round(args: dict[str, Any], ctx: ToolContext) -> str:
    name = (await ctx.ask_client({"step1": _name_form("Step 1: What is your name?")}))["step1"]
    color = (await ctx.ask_client({"step2": _name_form("Step 2: What is your favorite color?", "color")}))["step2"]
    return f"{(name.content or {}).get('name')} likes {(color.content or {}).get('color')}"


async def ir_capabilities(args: dict[str, Any], ctx: ToolContext) -> str:
    if "elicitation" in ctx.client.capabilities:
        answer = (await ctx.ask_client({"user_name": _name_form("What is your name?")}))["user_name"]
        return f"Hello, {(answer.content or {}).get('name')}!"
    if "sampling" in ctx.client.capabilities:
        answer = (await ctx.ask_client({"greeting": ctx.sample_request(["Generate a greeting"], 50)}))["greeting"]
        return f"Greeting: {answer.get('content', {}).get('text')}"
    return "The client declared neither elicitation nor sampling."


def custom_headers(args: dict[str, Any], ctx: ToolContext) -> str:
    return f"Received: {json.dumps(args, sort_keys=True)}"


# --- the tasks extension (SEP-2663) --------------------------------------------------------------


def greet(args: dict[str, Any], ctx: ToolContext) -> str:
    return f"Hello, {args['name']}!"


async def slow_compute(args: dict[str, Any], ctx: ToolContext) -> str:
    await anyio.sleep(float(args["seconds"]))
    return f"Computed {args.get('label', '')} after {args['seconds']} seconds"


async def failing_job(args: dict[str, Any], ctx: ToolContext) -> str:
    await anyio.sleep(1)
    raise ToolFailure("The job failed, as this fixture always does")


def protocol_error_job(args: dict[str, Any], ctx: ToolContext) -> str:
    raise ProtocolError(-32603, "The job broke down below the tool (a protocol error, as this fixture always does)")


async def confirm_delete(args: dict[str, Any], ctx: ToolContext) -> str:
    schema = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
    answer = await ctx.elicit(f"Delete {args['filename']}?", schema)
    confirmed = answer.action == "accept" and (answer.content or {}).get("confirm") is True
    return f"{args['filename']}: {'deleted' if confirmed else 'kept'}"


async def multi_input(args: dict[str, Any], ctx: ToolContext) -> str:
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "confirm": {"type": "boolean"}}}
    answers = await ctx.ask_client(
        {"first": ctx.elicit_request("First input", schema), "second": ctx.elicit_request("Second input", schema)}
    )
    names = [(answer.content or {}).get("name") for answer in answers.values()]
    return "Inputs: " + ", ".join(str(name) for name in names)


async def tool_with_task(args: dict[str, Any], ctx: ToolContext) -> str:
    name = (await ctx.ask_client({"user_name": _name_form("What is your name?")}))["user_name"]
    await ctx.continue_as_task()
    await anyio.sleep(0.2)
    return f"Hello, {(name.content or {}).get('name')}! (from a task)"
