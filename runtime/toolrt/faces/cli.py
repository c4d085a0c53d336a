"""The `toolrt` command line. `main(argv)` returns the exit code, so it can be tested by calling it.

Exit codes: 0 success, 1 invalid config or an error result, 2 usage errors. Heavy modules are
imported only by the commands that need them (`mcp` by serve, `watchfiles` by watch and serve).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .. import __version__

if TYPE_CHECKING:
    from ..api import Runtime
    from ..config.settings import ResolvedSettings
    from ..errors import UsageError
    from ..permissions.ask import AskRequest, Reply
    from ..permissions.model import Decision
    from ..scope import CallScope

__all__ = ["main"]

FORMATS = ("openai", "openai-responses", "anthropic", "gemini", "mcp")
FORMATS_OF_VALIDATE = ("text", "json", "github", "sarif")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse exits 2 on usage errors, as the contract says
        from ..errors import UsageError

        self.print_usage(sys.stderr)
        raise UsageError(message)


SELECTION_OPTIONS = ("agent", "model", "provider", "client", "toolset", "flag")
"""The options that choose which tools a model sees; `list`, `specs`, `check`, `call` and `serve` share them."""


def _selection_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("selection (which tools are offered, and under whose rules)")
    group.add_argument(
        "--agent", metavar="NAME", help="agent whose permission rules apply (default: the rules' default agent)"
    )
    group.add_argument(
        "--model", metavar="ID", help="model the tools are offered to (e.g. gpt-5); filters `when: models`"
    )
    group.add_argument(
        "--provider", metavar="ID", help="provider of the model (e.g. openai, anthropic); filters `when: providers`"
    )
    group.add_argument("--client", metavar="NAME", help="client name (e.g. cli, desktop); filters `when: clients`")
    group.add_argument("--toolset", metavar="NAME", help="offer only this tool set's tools (toolrt.yaml `toolsets:`)")
    group.add_argument(
        "--flag",
        action="append",
        default=[],
        metavar="NAME[=BOOL]",
        help="turn a flag on (NAME) or set it (NAME=false); repeatable; overrides TOOLRT_FLAG_<NAME> and toolrt.yaml",
    )


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def _host_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("host settings (beat the environment and every settings file)")
    group.add_argument("--data-dir", metavar="DIR", help="where outputs, sessions and the audit log live")
    group.add_argument("--audit", metavar="FILE|off", help="the audit log file, or off")
    group.add_argument("--locked-permissions", metavar="FILE", help="an administrator's permissions file")
    group.add_argument(
        "--sandbox",
        choices=("read-only", "workspace-write", "off"),
        help="the OS sandbox of every process toolrt starts (default workspace-write; the locked file may fix it)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="toolrt",
        description="A declarative tool runtime for LLM agents: tools, permissions and flags in YAML.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_examples(
            "toolrt init my-project              # a starter project: tools, safe permissions, settings",
            "toolrt validate --strict            # CI: exit 1 on any error or warning in the project's files",
            "toolrt list --model gpt-5           # the tools gpt-5 sees, and why the others are hidden",
            'toolrt call read \'{"filePath": "README.md"}\'',
            "toolrt serve --toolset readonly     # an MCP server over stdio",
            "",
            "Run `toolrt COMMAND --help` for a command's options and examples.",
        ),
    )
    parser.add_argument(
        "--version", action="version", version=f"toolrt {__version__}", help="print the version and exit"
    )
    commands = parser.add_subparsers(
        dest="command", required=True, parser_class=_Parser, metavar="COMMAND", help="one of:"
    )

    def command(name: str, help: str, *examples: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(
            name,
            help=help,
            description=help,
            epilog=_examples(*examples),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub.add_argument(
            "--root", default=".", metavar="DIR", help="project directory (default: the current directory)"
        )
        sub.add_argument(
            "--color",
            choices=("auto", "always", "never"),
            default="auto",
            help="colour decisions and errors: auto (at a terminal, unless NO_COLOR is set), always, never",
        )
        return sub

    validate = command(
        "validate",
        "check the config; exit 1 when invalid",
        "toolrt validate",
        "toolrt validate --strict --format github    # in a GitHub Actions step",
        "toolrt validate tools.d/search.yaml         # pre-commit: the project is found from the file",
        "toolrt validate --format sarif > toolrt.sarif",
    )
    validate.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="config files to check; each one's project is the nearest directory above it with tools.d/,"
        " permissions.yaml or toolrt.yaml (not above the repository root)",
    )
    validate.add_argument(
        "--format",
        choices=FORMATS_OF_VALIDATE,
        default="text",
        help="text (file:line:column: message), json, github (workflow annotations) or sarif (SARIF 2.1.0)",
    )
    validate.add_argument(
        "--all", action="store_true", help="also show warnings about built-in and plugin files (errors always show)"
    )
    validate.add_argument("--strict", action="store_true", help="warnings fail too (exit 1)")
    listing = command(
        "list",
        "the tools a model sees, and why the others are hidden",
        "toolrt list",
        "toolrt list --model gpt-5 --provider openai --agent plan",
        "toolrt list --toolset readonly --flag batch_tool --json",
    )
    _selection_options(listing)
    listing.add_argument("--json", action="store_true", help="print {tools: [...], hidden: [...]} as JSON")
    listing.add_argument(
        "--client-capabilities",
        metavar="JSON",
        help="list what `toolrt serve` offers an MCP client declaring these capabilities, e.g. '{}' (no "
        "elicitation: tools whose every call asks are left out) or '{\"elicitation\": {}}'",
    )
    listing.add_argument(
        "--offer-unaskable", action="store_true", help="with --client-capabilities: as `toolrt serve --offer-unaskable`"
    )
    specs = command(
        "specs",
        "provider function specs as a JSON array on stdout",
        "toolrt specs --format openai --model gpt-5",
        "toolrt specs --format anthropic --toolset readonly > tools.json",
    )
    specs.add_argument("--format", choices=FORMATS, required=True, help="the provider's spec format")
    _selection_options(specs)
    check = command(
        "check",
        "explain the permission decision for a pattern or a whole call",
        "toolrt check bash 'git push origin main'",
        "toolrt check edit src/app.py --agent plan",
        'toolrt check --tool bash --args \'{"command": "ls && rm -rf build"}\' --json',
    )
    check.add_argument("permission", nargs="?", help="permission key (e.g. bash, edit, read, webfetch)")
    check.add_argument("pattern", nargs="?", help="the pattern the call would ask for (a command, a path, a URL)")
    check.add_argument("--tool", metavar="ID", help="check a whole call of this tool instead (with --args)")
    check.add_argument("--args", default="{}", metavar="JSON", help="the call's arguments as JSON (default: {})")
    check.add_argument("--json", action="store_true", help="print the decision and each request as JSON")
    _selection_options(check)
    call = command(
        "call",
        "run one tool call through the whole pipeline",
        'toolrt call read \'{"filePath": "README.md"}\'',
        'toolrt call bash \'{"command": "ls", "description": "list files"}\' --yes',
        "toolrt call todowrite '{\"todos\": []}' --session s1 --json",
    )
    call.add_argument("tool", help="tool name as the model would call it")
    call.add_argument("args", nargs="?", default="{}", help="arguments as JSON (default: {})")
    _selection_options(call)
    call.add_argument(
        "--session",
        default="cli",
        metavar="ID",
        help="session whose memory (read times, todos) the call uses and keeps (default: cli)",
    )
    answer = call.add_mutually_exclusive_group()
    answer.add_argument("--yes", action="store_true", help="approve what asks, once")
    answer.add_argument("--no", action="store_true", help="reject what asks")
    call.add_argument("--json", action="store_true", help="print {title, output, metadata, error} as JSON")
    watch = command(
        "watch",
        "print each reload as the config changes",
        "toolrt watch",
        "toolrt watch --json | jq .",
    )
    watch.add_argument("--json", action="store_true", help="one JSON object per reload")
    serve = command(
        "serve",
        "serve the tools over MCP",
        "toolrt serve                                   # stdio, for desktop clients",
        "toolrt serve --toolset readonly --agent plan",
        "toolrt serve --transport http --port 8765      # streamable HTTP on 127.0.0.1",
    )
    serve.add_argument(
        "--transport", choices=("stdio", "http"), default="stdio", help="stdio (default) or streamable HTTP"
    )
    serve.add_argument("--host", help="HTTP address to listen on (default: serve.host setting, 127.0.0.1)")
    serve.add_argument("--port", type=int, help="HTTP port (default: serve.port setting, 8765)")
    _selection_options(serve)
    serve.add_argument("--page-size", type=int, help="tools per tools/list page (default: 10000)")
    serve.add_argument(
        "--session-idle", type=float, metavar="SECONDS", help="release sessions unused this long (default: 1800)"
    )
    serve.add_argument(
        "--max-sessions", type=int, help="sessions held at once, the most idle released first (default: 4096)"
    )
    serve.add_argument(
        "--offer-unaskable",
        action="store_true",
        help="offer clients that declared no elicitation the tools whose every call asks (each call is denied)",
    )
    serve.add_argument(
        "--health",
        action="store_true",
        help="ask the server running at --host/--port: print its GET /healthz, exit 0 when ready, else 1",
    )
    serve.add_argument(
        "--dev",
        action="store_true",
        help="development mode: the third identical call in a row runs with a warning instead of being stopped",
    )
    schema = command(
        "schema",
        "print a config file's JSON Schema, or write the schemas for an editor",
        "toolrt schema tool > tool.schema.json",
        "toolrt schema --write .toolrt/schemas      # refresh the copies `toolrt init` wrote",
    )
    schema.add_argument(
        "name",
        nargs="?",
        choices=("tool", "permissions", "project", "settings"),
        help="tool (tools.d/*.yaml), permissions or project (toolrt.yaml); with --write, default: all three",
    )
    schema.add_argument(
        "--write",
        metavar="DIR",
        help="write the schema file(s) into DIR instead of printing (what `toolrt init` puts in .toolrt/schemas)",
    )
    chat = command(
        "chat",
        "a terminal agent loop against an OpenAI-compatible endpoint, to watch a model use the tools",
        "OPENAI_API_KEY=... toolrt chat --base-url https://api.openai.com/v1 --model gpt-5",
        "toolrt chat --base-url http://localhost:11434/v1 --model qwen3 --agent plan   # a local server",
    )
    chat.add_argument(
        "--base-url", metavar="URL", help="the endpoint's base URL, ending in /v1 (default: $OPENAI_BASE_URL)"
    )
    chat.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="NAME",
        help="environment variable holding the API key (default: OPENAI_API_KEY; unset sends none)",
    )
    chat.add_argument("--system", metavar="TEXT", help="a system message to start the conversation with")
    chat.add_argument(
        "--session", default="chat", metavar="ID", help="session whose approvals and memory the calls use"
    )
    _selection_options(chat)
    settings = command(
        "settings",
        "the effective settings and flags, where each value came from, and project values ignored",
        "toolrt settings",
        "toolrt settings --json",
        "TOOLRT_TIMEOUT=30 toolrt settings             # see the environment win",
    )
    settings.add_argument("--json", action="store_true", help="one JSON object: settings, flags, ignored")
    lsp = command(
        "lsp",
        "check the project's language servers: start each, initialize it, report what it supports, stop it",
        "toolrt lsp check",
        "toolrt lsp check --server pylsp --json",
    )
    lsp.add_argument("action", choices=("check",), help="check (the only action)")
    lsp.add_argument(
        "--server", action="append", default=[], metavar="NAME", help="check only this server (repeatable)"
    )
    lsp.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="how long a server may take to start"
    )
    lsp.add_argument("--json", action="store_true", help="print {servers: [...]} as JSON")
    trust = command(
        "trust",
        "review the config files and modules the model changed, and approve them so they load",
        "toolrt trust                      # show each change; on a terminal, ask about each",
        "toolrt trust --yes                # approve every change shown",
        "toolrt trust tools.d/p.yaml --yes",
        "toolrt trust --json               # {held: [...], approved: [...]}",
    )
    trust.add_argument("files", nargs="*", metavar="FILE", help="only these files (relative to --root)")
    trust.add_argument("--yes", action="store_true", help="approve every change shown, without asking")
    trust.add_argument("--json", action="store_true", help="print {held, approved} as JSON")
    audit = command(
        "audit",
        "print the audit records, from the store TOOLRT_STORE names or else the audit log file",
        "toolrt audit --since 1h",
        "toolrt audit --tool bash --decision deny --json | jq .arguments",
    )
    audit.add_argument("--session", metavar="ID", help="one session's: its name, token, or the id records name")
    audit.add_argument("--tool", metavar="NAME", help="one tool's calls")
    audit.add_argument("--decision", choices=("allow", "ask", "deny"), help="calls the rules decided so")
    audit.add_argument("--since", metavar="T", help="records since T: 30m, 12h, 7d, or 2026-11-28T09:00Z")
    audit.add_argument("--json", action="store_true", help="one JSON record per line")
    status = command(
        "status",
        "the toolrt serve replicas over the store TOOLRT_STORE names: the snapshot each serves, whether it is ready",
        "toolrt status",
        "toolrt status --json",
    )
    status.add_argument("--json", action="store_true", help="one JSON object: replicas, snapshots")
    for sub in (listing, specs, check, call, watch, serve, chat, settings, lsp, trust, audit, status):
        _host_options(sub)
    init = command(
        "init",
        "write a starter project",
        "toolrt init my-project",
        "cd my-project && toolrt validate && toolrt list",
    )
    init.add_argument("directory", nargs="?", default=".", help="where to write it (default: the current directory)")
    return parser


_TRACED = ("call", "serve", "chat")
"""The commands that configure OpenTelemetry from `OTEL_*` (`faces.otel`)."""


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    if argv is None:  # the `toolrt` command owns its process: its builds may pause the garbage collector
        from ..config.collect import pause_collector_during_builds

        pause_collector_during_builds()
    try:
        options = _parser().parse_args(list(argv) if argv is not None else None)
        options.err = err
        handler = globals()[f"_cmd_{options.command}"]
        if options.command not in _TRACED:
            code: int = handler(options, out)
            return code
        from .otel import configure

        flush = configure()  # the OpenTelemetry SDK from OTEL_* (the `otel` extra), flushed before exit
        try:
            code = handler(options, out)
        finally:
            flush()
        return code
    except SystemExit:  # `--help`, `--version`: answered without importing a module of the runtime
        raise
    except (_errors().UsageError, _errors().StoreError) as error:  # looked up only when something is raised
        print(f"toolrt: {error}", file=err)
        return 2
    except _errors().ConfigError as error:
        from .validate_report import problem_text

        for problem in error.problems:
            print(problem_text(problem), file=err)
        print(
            f"toolrt: the config is invalid ({len(error.problems)} problem(s)); run `toolrt validate` for details",
            file=err,
        )
        return 1
    except KeyboardInterrupt:
        if _PROMPTS_WAITING:
            # A daemon thread is blocked reading the terminal: finishing normally would wait for (or
            # trip over) it, so Ctrl-C at a prompt leaves at once.
            import os

            print(file=err, flush=True)
            sys.stdout.flush()
            os._exit(130)
        return 130
    except BrokenPipeError:  # `toolrt specs | head`: the reader left; not an error worth a traceback
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _errors() -> Any:
    """`toolrt.errors`, imported when a command fails or runs: `toolrt --help` loads no module of the runtime."""
    from .. import errors

    return errors


def _flags(values: Sequence[str]) -> dict[str, bool]:
    from ..config.settings import parse_flag_option

    return dict(parse_flag_option(v) for v in values)


def _load(options: argparse.Namespace, *, blocked_ok: bool = True) -> Runtime:
    """The runtime for a command; a broken config still loads (failing closed), its problems on stderr.

    The tools of invalid tool files are left out; with an invalid `permissions.yaml`, `toolrt.yaml` or
    locked file no call runs (`blocked_ok=False`: the command stops with exit 1, for `check`).
    """
    from ..api import Runtime
    from ..build.snapshot import degraded_lines

    settings = {
        "data_dir": getattr(options, "data_dir", None),
        "audit": getattr(options, "audit", None),
        "locked_permissions": getattr(options, "locked_permissions", None),
        "sandbox.mode": getattr(options, "sandbox", None),
        "serve.host": getattr(options, "host", None),
        "serve.port": getattr(options, "port", None),
    }
    rt = Runtime.load(
        options.root,
        flags=_flags(getattr(options, "flag", [])),
        settings={key: value for key, value in settings.items() if value is not None},
        partial=True,
    )
    snapshot = rt.snapshot
    if snapshot.blocked is not None and not blocked_ok:
        raise snapshot.blocked
    err = getattr(options, "err", None) or sys.stderr
    for line in degraded_lines(snapshot):
        print(f"toolrt: warning: {line}", file=err)
    return rt


# --- commands -------------------------------------------------------------------------------------


def _cmd_validate(options: argparse.Namespace, out: TextIO) -> int:
    from ..errors import UsageError
    from .terminal import PaintedLines, painter
    from .validate_report import render, validate_paths

    if options.files and options.root != ".":
        raise UsageError("give FILE arguments or --root, not both (each file's project is found from the file)")
    outcome = validate_paths(Path(options.root), options.files, all_files=options.all)
    paint = painter(options.color, out)
    shown: Any = PaintedLines(out, paint) if paint.on and options.format == "text" else out
    render(outcome, options.format, shown, strict=options.strict, all_files=options.all)
    shown.flush()
    return 0 if outcome.passes(strict=options.strict) else 1


def _scope(options: argparse.Namespace) -> CallScope:
    """The command's scope from its selection options (flags are the Runtime's, set at load)."""
    from ..scope import CallScope

    return CallScope(
        agent=getattr(options, "agent", None),
        model=getattr(options, "model", None),
        provider=getattr(options, "provider", None),
        client=getattr(options, "client", None),
        session=getattr(options, "session", None) or "default",
        toolset=getattr(options, "toolset", None),
    )


def _cmd_list(options: argparse.Namespace, out: TextIO) -> int:
    rt = _load(options)
    scope = _scope(options)
    toolset = rt.tools(scope)
    if options.client_capabilities is not None and not options.offer_unaskable:
        if not _declares_elicitation(options.client_capabilities):
            from ..build.unaskable import without_unaskable

            toolset = without_unaskable(toolset, rt.snapshot, scope.agent)
    if options.json:
        json.dump(
            {
                "tools": [
                    {"name": o.name, "id": o.tool.id, "source": o.tool.definition.source} for o in toolset.offered
                ],
                "hidden": [{"id": h.id, "reason": h.reason} for h in toolset.hidden],
            },
            out,
            indent=2,
        )
        out.write("\n")
        return 0
    width = max((len(o.name) for o in toolset.offered), default=4)
    for offered in toolset.offered:
        first = offered.tool.description.strip().splitlines()[0] if offered.tool.description.strip() else ""
        alias = f" (as override {offered.tool.id})" if offered.name != offered.tool.id else ""
        out.write(f"{offered.name:<{width}}  {first[:90]}{alias}\n")
    if toolset.hidden:
        out.write("\nhidden:\n")
        for hidden in toolset.hidden:
            out.write(f"  {hidden.id}: {hidden.reason}\n")
    return 0


def _declares_elicitation(text: str) -> bool:
    """Whether `--client-capabilities` (an MCP `ClientCapabilities` object as JSON) declares elicitation."""
    from ..errors import UsageError

    try:
        capabilities = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(
            f"--client-capabilities: not JSON ({error.msg}); e.g. '{{}}' or '{{\"elicitation\": {{}}}}'"
        ) from None
    if not isinstance(capabilities, dict):
        raise UsageError("--client-capabilities: expected a JSON object, e.g. '{}' or '{\"elicitation\": {}}'")
    return capabilities.get("elicitation") is not None


def _cmd_specs(options: argparse.Namespace, out: TextIO) -> int:
    rt = _load(options)
    json.dump(rt.specs(options.format, _scope(options)), out, indent=2, ensure_ascii=False)
    out.write("\n")
    return 0


def _decision_json(decision: Decision) -> dict[str, Any]:
    return {
        "action": decision.action,
        "requests": [
            {
                "permission": d.permission,
                "pattern": d.pattern,
                "action": d.action,
                "rule": None
                if d.rule is None
                else {
                    "permission": d.rule.permission,
                    "pattern": d.rule.pattern,
                    "action": d.rule.action,
                    "source": d.rule.source,
                },
                **({"reason": d.reason} if d.reason else {}),
            }
            for d in decision.decisions
        ],
    }


def _cmd_check(options: argparse.Namespace, out: TextIO) -> int:
    from ..errors import UsageError
    from ..permissions.model import unmatched_basis
    from .terminal import painter

    paint = painter(options.color, out)
    rt = _load(options, blocked_ok=False)
    if options.tool:
        if options.permission or options.pattern:
            raise UsageError("give either PERMISSION PATTERN or --tool ID --args JSON, not both")
        try:
            args = json.loads(options.args)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--args is not valid JSON: {exc.msg} at position {exc.pos}") from None
        decision, _ = rt.check_call(options.tool, args, _scope(options))
        hidden = next((h.reason for h in rt.tools(_scope(options)).hidden if h.id == options.tool), None)
    else:
        if not (options.permission and options.pattern):
            raise UsageError("give PERMISSION PATTERN, or --tool ID --args JSON")
        decision = rt.check(options.permission, options.pattern, agent=options.agent)
        hidden = None
    unasked = None if options.tool else _unasked_permission(rt, options.permission)
    if options.json:
        notes = {**({"hidden": hidden} if hidden else {}), **({"note": unasked} if unasked else {})}
        json.dump({**_decision_json(decision), **notes}, out, indent=2)
        out.write("\n")
        return 0
    for d in decision.decisions:
        why = (
            f'rule {d.rule.permission} "{d.rule.pattern}": {d.rule.action} ({d.rule.source})'
            if d.rule
            else unmatched_basis(d.permission)
        )
        extra = f" [{d.reason}]" if d.reason else ""
        out.write(f"{paint(f'{d.action:<5}', d.action)}  {d.permission} {d.pattern!r}  ← {why}{extra}\n")
    if not decision.decisions:
        out.write(f"{paint('allow', 'allow')}  (the call makes no permission request)\n")
    out.write(f"decision: {paint(decision.action, decision.action)}\n")
    if hidden:
        out.write(f"note: {options.tool} is not offered for this selection: {hidden}\n")
    if unasked:
        out.write(f"note: {unasked}\n")
    return 0


def _unasked_permission(rt: Runtime, permission: str) -> str | None:
    """What to say when no tool of the config asks `permission` (a typo such as `bsh`): the verdict
    stands for the rules, but no call will ever meet it."""
    import difflib

    from .validate import RUNTIME_PERMISSIONS

    tools = rt.snapshot.tools.values()
    known = sorted({tool.permission_key for tool in tools} | {tool.id for tool in tools} | RUNTIME_PERMISSIONS)
    if permission in known:
        return None
    close = difflib.get_close_matches(permission, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"no tool asks the permission {permission!r}{hint} (the rules above decide it, but no call will ask it)"


_PROMPTS_WAITING: set[int] = set()
"""Threads blocked reading a line from the terminal (see `_read_line`): process-wide on purpose, since
the terminal is the process's, not a Runtime's."""


async def _read_line(prompt: str) -> str | None:
    """One line typed at the terminal; None at end of input (Ctrl-D, a closed stdin).

    The read runs in a daemon thread of its own, so Ctrl-C ends `toolrt` at once (exit 130) instead
    of waiting for a worker thread stuck in `input()` until Enter.
    """
    import os
    import signal
    import threading

    import anyio
    import anyio.from_thread
    import anyio.lowlevel

    done = anyio.Event()
    token = anyio.lowlevel.current_token()
    box: list[str | None] = []

    def read() -> None:
        _PROMPTS_WAITING.add(threading.get_ident())
        try:
            # The prompt goes to stderr with the question: stdout carries the tool's output only.
            print(prompt, end="", file=sys.stderr, flush=True)
            box.append(input(""))
        except EOFError:
            box.append(None)
        finally:
            _PROMPTS_WAITING.discard(threading.get_ident())
            try:
                anyio.from_thread.run_sync(done.set, token=token)
            except RuntimeError:
                pass  # the event loop is gone (Ctrl-C): nobody waits for the line any more

    def leave(signum: int, frame: object) -> None:
        # Ctrl-C while the person is asked: exit 130 at once, whatever the cancelled call would await.
        print(file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(130)

    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, leave) if in_main else None
    try:
        threading.Thread(target=read, name="toolrt-prompt", daemon=True).start()
        await done.wait()
    finally:
        if in_main:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
    return box[0] if box else None


_ONCE = ("o", "once", "y", "yes")
_ALWAYS = ("a", "always")
_REJECT = ("r", "reject", "n", "no")


def _terminal_asker(out: TextIO) -> Any:
    """Ask at the terminal: once / always / reject. End of input rejects; another answer asks again."""
    from ..permissions.ask import Reply

    async def ask(request: AskRequest) -> Reply:
        from ..permissions.shown import ask_lines

        print("\n" + "\n".join(ask_lines(request, indent="  ")), file=sys.stderr, flush=True)
        while True:
            answer = await _read_line("allow? [o]nce / [a]lways / [r]eject: ")
            if answer is None:
                print("\n(end of input: rejected)", file=sys.stderr, flush=True)
                return Reply("reject")
            choice = answer.strip().lower()
            if choice in _ONCE:
                return Reply("once")
            if choice in _ALWAYS:
                return Reply("always")
            if choice in _REJECT:
                break
            print(f"answer o (once), a (always) or r (reject), not {answer.strip()!r}", file=sys.stderr, flush=True)
        message = await _read_line("message for the model (optional): ")
        return Reply("reject", (message or "").strip() or None)

    return ask


def _terminal_questioner() -> Any:
    """Put the `question` tool's questions to the person at the terminal (numbers, or typed text)."""

    async def questioner(questions: Sequence[Mapping[str, Any]]) -> list[list[str]]:

        answers: list[list[str]] = []
        for item in questions:
            from ..permissions.shown import escape_controls

            options = [str(option.get("label", "")) for option in item.get("options", ())]
            header = escape_controls(str(item.get("header") or "Question"))
            lines = [f"\n{header}: {escape_controls(str(item['question']), keep_newlines=True)}"]
            lines.extend(f"  {number}. {escape_controls(label)}" for number, label in enumerate(options, 1))
            print("\n".join(lines), file=sys.stderr, flush=True)
            hint = "numbers, comma-separated" if item.get("multiple") else "a number"
            reply = await _read_line(f"answer ({hint}, or your own words): ")
            answers.append(_chosen((reply or "").strip(), options, multiple=bool(item.get("multiple"))))
        return answers

    return questioner


def _chosen(reply: str, options: Sequence[str], *, multiple: bool) -> list[str]:
    """The labels a reply picks (`2` or `1,3`), or the reply itself when it is not option numbers."""
    picks = [part.strip() for part in reply.split(",")] if multiple else [reply]
    if picks and all(p.isdigit() and 1 <= int(p) <= len(options) for p in picks):
        return [options[int(p) - 1] for p in picks]
    return [reply] if reply else []


def _fixed_asker(kind: str) -> Any:
    from ..permissions.ask import Reply

    async def ask(request: AskRequest) -> Reply:
        return Reply(kind)  # type: ignore[arg-type]

    return ask


def _unknown_tool(rt: Runtime, name: str, scope: CallScope) -> UsageError | None:
    """A usage error for a tool name the config does not define in any case (a person typed it: the model's
    `invalid` text is not the answer), with the closest offered names; None when the name is known."""
    import difflib

    from ..errors import UsageError

    snapshot = rt.snapshot
    if name in snapshot.tools or name.lower() in snapshot.tools or name in snapshot.withheld:
        return None
    names = rt.tools(scope).names()
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(n) for n in close)}?" if close else ""
    return UsageError(f"unknown tool {name!r}{hint} (tools: {', '.join(names) or 'none'})")


def _cmd_call(options: argparse.Namespace, out: TextIO) -> int:
    import anyio

    rt = _load(options)
    unknown = _unknown_tool(rt, options.tool, _scope(options))
    if unknown is not None:
        raise unknown
    if options.yes:
        asker = _fixed_asker("once")
    elif options.no:
        asker = _fixed_asker("reject")
    elif sys.stdin.isatty() and sys.stderr.isatty():
        asker = _terminal_asker(out)
        if rt.snapshot.held:
            _review_held(rt, options.err)
    else:
        asker = None
    questioner = _terminal_questioner() if sys.stdin.isatty() and sys.stderr.isatty() else None
    state_file = _session_file(rt, options.session)
    _tell_unasked_once(rt, options, state_file.with_suffix(".notice"))
    agent = options.agent or rt.snapshot.permissions.default_agent
    approvals, kept = _restore_session(rt, options.session, agent, state_file)
    live = None
    call_id = ""
    if not options.json and _is_terminal(out):  # the output as it is produced, as MCP progress carries it
        import secrets

        from .terminal import LiveOutput

        call_id = f"cli_{secrets.token_hex(4)}"
        live = LiveOutput(out, call_id)
        rt.subscribe(live.listen)
    result = anyio.run(
        lambda: rt.call(options.tool, options.args, _scope(options), ask=asker, questioner=questioner, call_id=call_id)
    )
    _keep_session(rt, options.session, agent, state_file, approvals, kept)
    if options.json:
        json.dump(result.to_json(), out, indent=2, ensure_ascii=False, default=str)
        out.write("\n")
    elif result.error is not None:
        from .terminal import painter

        error = result.error
        if live is not None:
            if live.shown and not live.shown.endswith("\n"):
                out.write("\n")
            error = live.rest(error).strip("\n")
        print(painter(options.color, options.err)(error, "error"), file=options.err)
    else:
        text = live.rest(result.output) if live is not None else result.output
        out.write(text)
        if not (live.shown + text if live is not None else text).endswith("\n"):
            out.write("\n")
    return 0 if result.error is None else 1


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _tell_unasked_once(rt: Runtime, options: argparse.Namespace, seen: Path) -> None:
    """Say on stderr which offered tools run without asking, once per session (again when the list changes)."""
    from ..build.unasked import runs_without_asking, unasked_notice

    notice = unasked_notice(runs_without_asking(rt.snapshot, rt.tools(_scope(options)), options.agent))
    if notice is None:
        return
    try:
        if seen.read_text(encoding="utf-8") == notice:
            return
    except OSError:
        pass  # not said in this session yet
    print(notice, file=options.err)
    try:
        seen.parent.mkdir(parents=True, exist_ok=True)
        seen.write_text(notice, encoding="utf-8")
    except OSError as error:
        print(f"toolrt: could not remember the notice in {seen}: {error}", file=options.err)


def _restore_session(rt: Runtime, session: str, agent: str, state_file: Path) -> tuple[dict[str, Any], Any]:
    """Put back what earlier `toolrt call --session` runs kept of `session`: the tools' memory, and the
    "always" approvals, which outlive the process kept per session (the file) and agent (the key); the
    approvals file's content and `agent`'s entry in it."""
    rt.sessions.restore(session, _read_json(state_file))
    approvals = _read_json(state_file.with_suffix(".approvals.json"))
    kept = approvals.get(agent)
    if isinstance(kept, list):
        pairs = [
            (p[0], p[1]) for p in kept if isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
        ]
        rt.sessions.restore_approvals(session, pairs, agent=agent)
    return approvals, kept


def _keep_session(
    rt: Runtime, session: str, agent: str, state_file: Path, approvals: dict[str, Any], kept: Any
) -> None:
    """Keep `session`'s memory and, when they changed, `agent`'s "always" approvals for the next run."""
    _write_json(state_file, rt.sessions.state(session))
    now = [list(pair) for pair in rt.sessions.approvals(session, agent)]
    if now != kept and (now or kept):
        _write_json(state_file.with_suffix(".approvals.json"), {**approvals, agent: now})


def _session_file(rt: Runtime, session: str) -> Path:
    """Where `toolrt call --session S` keeps the session's memory between runs (read times, todos)."""
    import hashlib

    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in session)[:64]
    digest = hashlib.sha256(f"{rt.root}\0{session}".encode()).hexdigest()[:12]
    return rt.snapshot.data_dir / "sessions" / f"{safe}-{digest}.json"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # a first call, or a damaged file: start the session afresh
    return data if isinstance(data, dict) else {}


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    import os
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, encoding="utf-8") as handle:
            json.dump(data, handle, default=str)
        os.replace(handle.name, path)
    except OSError as error:
        print(f"toolrt: could not save session state to {path}: {error}", file=sys.stderr)


def _cmd_chat(options: argparse.Namespace, out: TextIO) -> int:
    import os

    import anyio

    from ..errors import UsageError

    try:
        import openai
    except ImportError:
        raise UsageError("toolrt chat needs the openai package: pip install 'toolrt[openai]'") from None
    from .chat import run_chat

    base_url = options.base_url or os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        raise UsageError("--base-url is required (or set OPENAI_BASE_URL)")
    if not options.model:
        raise UsageError("--model is required: the model id the endpoint serves")
    rt = _load(options)
    key = os.environ.get(options.api_key_env) or "none"  # local servers often take any key
    client = openai.AsyncOpenAI(base_url=base_url, api_key=key)
    interactive = sys.stdin.isatty()

    def read_line(prompt: str) -> str | None:
        try:
            return input(prompt)
        except EOFError:
            return None

    return anyio.run(
        lambda: run_chat(
            rt,
            client,
            model=options.model,
            scope=_scope(options),
            ask=_terminal_asker(out) if interactive else None,
            questioner=_terminal_questioner() if interactive else None,
            read_line=read_line,
            out=out,
            system=options.system,
            interactive=interactive,
        )
    )


def _cmd_watch(options: argparse.Namespace, out: TextIO) -> int:
    from .watch import run_watch

    rt = _load(options)
    rt.development = True
    return run_watch(rt, json_output=options.json, out=out, color=options.color)


def _cmd_serve(options: argparse.Namespace, out: TextIO) -> int:
    if options.health:
        from .status_view import probe_health

        return probe_health(_host_settings(options).values.serve, out)
    rt = _load(options)
    rt.default_store = "sqlite"  # a server keeps its sessions, approvals and audit records through a restart
    try:
        return _serve(rt, options)
    finally:
        rt.close()  # idempotent: run_serve closes it too; a usage error (a port in use) must not leak the store


def _serve(rt: Runtime, options: argparse.Namespace) -> int:
    from ..sandbox.config import sandbox_problems, sandbox_status
    from .serve import ServeLimits, run_serve
    from .validate_report import problem_text

    for problem in sandbox_problems(rt.snapshot.sandbox):
        print(problem_text(problem), file=options.err)
    print(f"toolrt serve: sandbox: {sandbox_status(rt.snapshot.sandbox)}", file=options.err)
    print(f"toolrt serve: store: {rt.store!r}", file=options.err)  # opened now: an unreachable one exits 2
    if options.dev:
        rt.development = True
        print("toolrt serve: development mode: repeated identical calls warn instead of stopping", file=options.err)
    serve = rt.settings.values.serve
    return run_serve(
        rt,
        transport=options.transport,
        host=serve.host,
        port=serve.port,
        scope=_scope(options),
        limits=ServeLimits(
            **{
                field: value
                for field, value in (
                    ("page_size", options.page_size),
                    ("session_idle", options.session_idle),
                    ("max_sessions", options.max_sessions),
                )
                if value is not None
            }
        ),
        offer_unaskable=options.offer_unaskable,
    )


def _host_settings(options: argparse.Namespace) -> ResolvedSettings:
    """The settings without loading the project's tools (host-only ones come from the host's layers)."""
    from ..config.settings import CommandLineSettings, resolve_settings

    values = {
        "data_dir": options.data_dir,
        "audit": options.audit,
        "locked_permissions": options.locked_permissions,
        "serve.host": getattr(options, "host", None),
        "serve.port": getattr(options, "port", None),
    }
    cli = CommandLineSettings({key: value for key, value in values.items() if value is not None})
    return resolve_settings(Path(options.root), cli=cli)


def _cmd_status(options: argparse.Namespace, out: TextIO) -> int:
    from .status_view import run_status

    return run_status(_host_settings(options), as_json=options.json, out=out)


def _cmd_audit(options: argparse.Namespace, out: TextIO) -> int:
    from ..config.settings import CommandLineSettings
    from .audit_view import run_audit

    values = {"data_dir": options.data_dir, "audit": options.audit, "locked_permissions": options.locked_permissions}
    cli = CommandLineSettings({key: value for key, value in values.items() if value is not None})
    return run_audit(
        Path(options.root),
        cli=cli,
        session=options.session,
        tool=options.tool,
        decision=options.decision,
        since=options.since,
        as_json=options.json,
        out=out,
        err=options.err,
    )


def _cmd_lsp(options: argparse.Namespace, out: TextIO) -> int:
    from .lsp_check import run_lsp_check

    rt = _load(options)
    try:
        return run_lsp_check(rt, servers=options.server, timeout=options.timeout, json_output=options.json, out=out)
    finally:
        rt.close()


def _review_held(rt: Runtime, err: TextIO) -> None:
    """On a terminal, before a call: show each config file or module the model changed (the build left
    them out) and load those the person approves (what `toolrt trust` does)."""
    from .trust import run_trust, terminal_confirm

    err.write("toolrt: the model changed config the person has not approved; it is not loaded until approved.\n")
    run_trust(rt, (), approve_all=False, json_output=False, out=err, confirm=terminal_confirm(err))


def _cmd_trust(options: argparse.Namespace, out: TextIO) -> int:
    from .trust import run_trust, terminal_confirm

    rt = _load(options)
    try:
        interactive = not options.yes and not options.json and sys.stdin.isatty() and sys.stderr.isatty()
        confirm = terminal_confirm(options.err) if interactive else None
        return run_trust(rt, options.files, approve_all=options.yes, json_output=options.json, out=out, confirm=confirm)
    finally:
        rt.close()


def _cmd_settings(options: argparse.Namespace, out: TextIO) -> int:
    from .settings_view import setting_rows, without_secrets

    rt = _load(options)
    resolved = rt.settings
    rows = [(key, _shown(value), origin) for key, value, origin in setting_rows(rt.snapshot)]
    if options.json:
        document = {
            "settings": {key: {"value": value, "origin": origin} for key, value, origin in rows},
            "ignored": [
                {"key": i.key, "value": _shown(without_secrets(i.key, i.value)), "origin": i.origin, "reason": i.reason}
                for i in resolved.ignored
            ],
        }
        json.dump(document, out, indent=2)
        out.write("\n")
        return 0
    width = max(len(origin) for _, _, origin in rows)
    for key, value, origin in rows:
        out.write(f"{origin:<{width}}  {key}={value}\n")
    for ignored in resolved.ignored:
        shown = _shown(without_secrets(ignored.key, ignored.value))
        out.write(f"ignored: {ignored.origin}  {ignored.key}={shown}  ({ignored.reason})\n")
    return 0


def _shown(value: Any) -> Any:
    """A setting's value as text or JSON: paths as strings, tuples as lists, None as null."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def _cmd_schema(options: argparse.Namespace, out: TextIO) -> int:
    from ..config.resources import SCHEMA_NAMES, schema
    from ..errors import UsageError

    if options.write:
        from .init import write_schemas

        names = (options.name,) if options.name else tuple(SCHEMA_NAMES)
        for path in write_schemas(Path(options.root) / options.write, names):
            out.write(f"wrote {path}\n")
        return 0
    if options.name is None:
        raise UsageError("name the schema (tool, permissions or project), or give --write DIR")
    json.dump(schema(options.name), out, indent=2)
    out.write("\n")
    return 0


def _cmd_init(options: argparse.Namespace, out: TextIO) -> int:
    from .init import write_starter

    for path in write_starter(Path(options.directory)):
        out.write(f"wrote {path}\n")
    return 0
