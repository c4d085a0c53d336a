"""The build: located documents → Snapshot → ToolSet.

```
templates       Jinja2 templates of argv/shell handlers, titles and patterns, compiled once
compiled        one tool compiled: validators, templates, patterns, static requests
project_import  a project's own handler modules, imported under the root's package name
snapshot        the immutable Snapshot a build makes (tools, rules, settings, sandbox policy)
locked_tools    the locked file's denial of whole tools
selection       a scope's ToolSet: what is offered, what is hidden and why
unasked         the tools a scope runs without asking (the start-up warning)
```
"""
