"""The `toolrt` command line. `main(argv)` returns the exit code, so it can be tested by calling it.

Exit codes: 0 success, 1 invalid config or an error result, 2 usage errors. Heavy modules are
imported only by the commands that need them (`mcp` by serve, `watchfiles` by watch and serve).

This module declares the arguments and dispatches; each family of commands is a module of its own,
imported only when one of its commands runs (`toolrt --help` imports none of them):

```
cli_project   validate, schema, init, settings, trust, watch, lsp check
cli_tools     list, specs, check
cli_call      call, chat (and the session files `call` keeps)
cli_serve     serve, status, audit
cli_runtime   the Runtime, scope and host settings the options select (shared)
prompts       asks and questions put to the person at the terminal
```
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from .. import __version__

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


_COMMANDS: Mapping[str, str] = {
    "validate": "cli_project",
    "schema": "cli_project",
    "init": "cli_project",
    "settings": "cli_project",
    "trust": "cli_project",
    "watch": "cli_project",
    "lsp": "cli_project",
    "list": "cli_tools",
    "specs": "cli_tools",
    "check": "cli_tools",
    "call": "cli_call",
    "chat": "cli_call",
    "serve": "cli_serve",
    "status": "cli_serve",
    "audit": "cli_serve",
}
"""Each command's module in this package, imported when the command runs; it defines `cmd_<command>`."""


def _handler(command: str) -> Callable[[argparse.Namespace, TextIO], int]:
    """The function that runs `command` (`cmd_<command>` of its module in `_COMMANDS`)."""
    import importlib

    module = importlib.import_module(f".{_COMMANDS[command]}", __package__)
    handler: Callable[[argparse.Namespace, TextIO], int] = getattr(module, f"cmd_{command}")
    return handler


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
        handler = _handler(options.command)
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
        from .prompts import PROMPTS_WAITING

        if PROMPTS_WAITING:
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
