"""The front ends: each turns the Runtime into something a person or a client uses.

```
cli             the `toolrt` command: its arguments, and dispatch to the module of each command
cli_project     `validate`, `schema`, `init`, `settings`, `trust`, `watch`, `lsp check`
cli_tools       `list`, `specs`, `check`
cli_call        `call`, `chat`, and the session files `toolrt call` keeps
cli_serve       `serve`, `status`, `audit`
cli_runtime     the Runtime, scope and host settings a command's options select
prompts         asks and questions put to the person at the terminal
chat            `toolrt chat`: a terminal agent loop over OpenAI
validate        `toolrt validate`'s checks beyond a build: imports, lint, self-tests, specs
validate_report which problems `toolrt validate` shows, where, in which format (text, json, github, sarif)
watch           `toolrt watch`: reload on every save and say what changed
lsp_check       `toolrt lsp check`
serve           `toolrt serve`: the MCP server (stdio and streamable HTTP), run from the serve_* modules:
serve_server    the low-level server and its handlers' registration
serve_face      the handlers: who is calling, tools/list, tools/call
serve_listing   tools/list in wire form, paged, shaped once per protocol version
serve_ask       approvals, questions and held changes as elicitation forms
serve_notes     a call's log and progress notifications
serve_wire      a call's result as MCP content
serve_notify    list_changed and toolrt's log messages to every client
serve_transport stdio and streamable HTTP
serve_heap      the heap settled after start-up and swaps
serve_limits    --page-size, --session-idle, --max-sessions
serve_sessions  MCP sessions mapped to toolrt sessions
init            `toolrt init`: a new project
```
"""
