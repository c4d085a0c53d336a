"""The call pipeline, one step a module, in the order the data flows:

```
request      CallRequest: what a caller asked (who is calling is `toolrt.scope`)
events       CallEvent: what listeners see of a call in flight
state        the Runtime's mutable side that outlives snapshots: sessions, approvals, audit, caches
active       ActiveCall: one call once repaired, as every later step sees it
arguments    parse, apply defaults, validate against the validator compiled per snapshot
permissions  the requests a call makes, the doom-loop check, the decision (ask included)
handlers     run a `python:` / `host:` handler        commands   run an `argv:` / `shell:` handler
deadline     stop a running handler at its timeout or on the caller's abort (one timer per call)
run          the execute step: result cache, the handler kind, the timeout
truncation   cut long output, save the full text, say how to read the rest
record       the audit line
pipeline     dispatch(): repair → arguments → permission → run → truncate → record
context      ToolContext: what a Python handler gets besides its arguments (a read-only view of its call)
detached     DetachedCall: the call behind a ToolContext outside a Runtime (fails closed)
sessions     SessionStore: the units that hold approvals, stamps, the loop history, todos
```
"""
