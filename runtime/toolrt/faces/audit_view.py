"""`toolrt audit`: the audit records, from the store the `store` setting names, else the JSON-lines file.

Filters: `--session` (a session's name or token, or the id records in a store name it by), `--tool`,
`--decision` (allow, ask or deny: what the rules decided for the call), `--since` (an ISO 8601 date or
time, or an age such as `30m`, `12h`, `7d`). `--json` prints one record per line; otherwise one line
per record: time, session, tool, status, decision.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from ..audit import read_records
from ..config.settings import CommandLineSettings, Settings, resolve_settings
from ..errors import UsageError
from ..store import AuditQuery, decision_of, is_persistent, open_store, session_id

__all__ = ["parse_since", "run_audit"]

_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str, now: float) -> float:
    """`--since`: an age (`90s`, `30m`, `12h`, `7d`, `2w`) before `now`, or an ISO 8601 date or time
    (UTC unless it names a zone); seconds since the epoch.

    Raises:
        UsageError: neither.
    """
    age = _AGE.fullmatch(text.strip().lower())
    if age is not None:
        return now - float(age.group(1)) * _SECONDS[age.group(2)]
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"--since {text}: not an age (30m, 12h, 7d) nor an ISO 8601 date or time (2026-11-28T09:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def _record_time(record: Mapping[str, Any]) -> float | None:
    value = record.get("time")
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _from_store(settings: Settings, session: str | None, query: AuditQuery) -> list[dict[str, Any]]:
    store = open_store(settings.store, settings.data_dir)
    try:
        if session is None:
            rows = store.audit_records(query)
        else:  # the id itself, or the name/token whose digest the store keeps
            ids = dict.fromkeys((session, session_id(session)))
            rows = sorted(
                (row for value in ids for row in store.audit_records(_with_session(query, value))),
                key=lambda row: row.time,
            )
    finally:
        store.close()
    return [json.loads(row.record) for row in rows]


def _with_session(query: AuditQuery, session: str) -> AuditQuery:
    return AuditQuery(session, query.tool, query.decision, query.since, query.limit)


def _from_file(path: Path, session: str | None, query: AuditQuery, err: TextIO) -> list[dict[str, Any]]:
    try:
        records, bad = read_records(path)
    except FileNotFoundError:
        print(f"toolrt audit: no audit log at {path} yet", file=err)
        return []
    except OSError as error:
        raise UsageError(f"cannot read the audit log {path}: {error.strerror or error}") from None
    if bad:
        print(f"toolrt audit: {path}: skipped {len(bad)} unreadable line(s): {bad[:10]}", file=err)
    return [record for record in records if _matches(record, session, query)]


def _matches(record: Mapping[str, Any], session: str | None, query: AuditQuery) -> bool:
    named = record.get("session")
    # Records name a session by its id; files written before 0.3 named it as given.
    if (
        session is not None
        and named not in (session, session_id(session))
        and not (isinstance(named, str) and session_id(named) == session)
    ):
        return False
    if query.tool is not None and record.get("tool") != query.tool:
        return False
    if query.decision is not None and decision_of(record.get("requests")) != query.decision:
        return False
    if query.since is not None:
        at = _record_time(record)
        if at is None or at < query.since:
            return False
    return True


def _line(record: Mapping[str, Any]) -> str:
    decision = decision_of(record.get("requests")) or "-"
    fields = (record.get("time"), record.get("session"), record.get("tool"), record.get("status"), decision)
    return "  ".join("-" if value is None else str(value) for value in fields)


def run_audit(
    root: Path,
    *,
    cli: CommandLineSettings,
    session: str | None,
    tool: str | None,
    decision: str | None,
    since: str | None,
    as_json: bool,
    out: TextIO,
    err: TextIO | None = None,
) -> int:
    """Print the records the filters select, oldest first; 0.

    The settings are the host's (the store, the data directory and the audit file are host-only, so the
    project's files cannot point this command elsewhere).

    Raises:
        StoreError: the store cannot be opened.
        UsageError: a bad `--since`, or an unreadable audit file.
    """
    err = err or sys.stderr
    settings = resolve_settings(root, cli=cli).values
    query = AuditQuery(tool=tool, decision=decision, since=None if since is None else parse_since(since, time.time()))
    if is_persistent(settings.store):
        records = _from_store(settings, session, query)
    elif settings.audit_path is None:
        raise UsageError("no audit record is kept: the audit setting is off and the store is memory")
    else:
        records = _from_file(settings.audit_path, session, query, err)
    _print(records, as_json, out)
    return 0


def _print(records: Iterable[Mapping[str, Any]], as_json: bool, out: TextIO) -> None:
    for record in records:
        if as_json:
            out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        else:
            out.write(_line(record) + "\n")
