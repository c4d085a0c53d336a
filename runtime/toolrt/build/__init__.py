"""The build: located documents → Snapshot → ToolSet.

```
templates       Jinja2 templates of argv/shell handlers, titles and patterns, compiled once
compiled        one tool compiled: validators, templates, patterns, static requests
project_import  a project's own handler modules, imported under the root's package name
tool_layers     the tools of a build from its layers (which definition wins), compiled with their descriptions
reuse           what one build read and compiled, taken again by the next build of the same Runtime
checks          checks across files: flags, model groups, overrides, tool sets, approved background
code_files      the project's handler code as files (protected paths, digests)
walls           what the sandbox keeps read-only of a build (toolrt's state, settings, locked file, code)
digests         a snapshot's digest and config digest
snapshot        the immutable Snapshot a build makes (tools, rules, settings, sandbox policy)
locked_tools    the locked file's denial of whole tools
selection       a scope's ToolSet: what is offered, what is hidden and why
unasked         the tools a scope runs without asking (the start-up warning)
```
"""
