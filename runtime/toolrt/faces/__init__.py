"""The front ends: each turns the Runtime into something a person or a client uses.

```
cli             the `toolrt` command: parsing, dispatch to the others, the small commands
chat            `toolrt chat`: a terminal agent loop over OpenAI
validate        `toolrt validate`'s checks beyond a build: imports, lint, self-tests, specs
validate_report which problems `toolrt validate` shows, where, in which format (text, json, github, sarif)
watch           `toolrt watch`: reload on every save and say what changed
lsp_check       `toolrt lsp check`
serve           `toolrt serve`: the MCP server (stdio and streamable HTTP)
serve_sessions  MCP sessions mapped to toolrt sessions
init            `toolrt init`: a new project
```
"""
