"""Language servers: diagnostics after `edit`, `write` and `apply_patch`, and the `lsp` tool.

`servers` declares which servers exist (the built-in `servers.yaml` under the host's settings);
`client` runs one (pygls's client over a sandboxed process); `manager` keeps them per (server, root)
on a loop of their own, restarts and closes them; `report` writes OpenCode's diagnostics blocks;
`access` is what a handler reaches as `ctx.lsp`; `held` is a Runtime's servers and each snapshot's
access to them, closed with it; `operations` are the `lsp` tool's requests.
"""
