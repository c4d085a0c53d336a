"""`toolrt status` (the replicas over one store and the snapshot each serves) and `toolrt serve --health`
(one running server's `GET /healthz`).

`toolrt status` reads the store the host's `store` setting names (unset: `sqlite`, as `toolrt serve`)
and lists the replicas that reported within `STALE_SECONDS`: id, ready or not, the digest of the snapshot
each serves, where it runs. Replicas serving different snapshots (one has not picked up a save yet, or
runs another copy of the config) are named; the exit status is then 1, else 0.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any, TextIO

from ..config.settings import ResolvedSettings, ServeSettings
from ..errors import UsageError
from ..store import Replica, open_store
from .serve_health import HEALTH_PATH, STALE_SECONDS

__all__ = ["probe_health", "run_status"]

PROBE_TIMEOUT_SECONDS = 5.0


def run_status(settings: ResolvedSettings, *, as_json: bool, out: TextIO) -> int:
    """Print the live replicas; 1 when they serve different snapshots, else 0.

    Raises:
        StoreError: the store cannot be opened.
        UsageError: the store is `memory` (nothing is shared to report).
    """
    values = settings.values
    setting = values.store if settings.origins.get("store", "default") != "default" else "sqlite"
    if setting.strip().lower() == "memory":
        raise UsageError("the store is memory: replicas report to a persistent store (sqlite or postgresql://…)")
    store = open_store(setting, values.data_dir)
    try:
        now = time.time()
        live = [replica for replica in store.replicas() if replica.seen >= now - STALE_SECONDS]
    finally:
        store.close()
    snapshots = sorted({replica.digest for replica in live})
    if as_json:
        out.write(json.dumps({"replicas": [_as_json(r, now) for r in live], "snapshots": snapshots}) + "\n")
    else:
        if not live:
            out.write(f"no replica reported in the last {STALE_SECONDS:g} s\n")
        for replica in live:
            ready = "ready" if replica.ready else "NOT READY"
            seen = now - replica.seen
            out.write(f"{replica.id}  {ready}  snapshot {replica.digest[:12]}  {replica.detail}  ({seen:.0f} s ago)\n")
        if len(snapshots) > 1:
            out.write(f"replicas serve {len(snapshots)} different snapshots: {', '.join(d[:12] for d in snapshots)}\n")
    return 1 if len(snapshots) > 1 else 0


def _as_json(replica: Replica, now: float) -> dict[str, Any]:
    return {
        "id": replica.id,
        "ready": replica.ready,
        "digest": replica.digest,
        "detail": replica.detail,
        "seen_seconds_ago": round(now - replica.seen, 3),
    }


def probe_health(serve: ServeSettings, out: TextIO) -> int:
    """GET the `/healthz` of the server at `serve.host`:`serve.port` and print it; 0 when it is ready.

    Raises:
        UsageError: nothing answers there (exit 2).
    """
    host = "127.0.0.1" if serve.host in ("0.0.0.0", "") else "::1" if serve.host == "::" else serve.host
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{serve.port}{HEALTH_PATH}"
    try:
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through $http_proxy
        with direct.open(url, timeout=PROBE_TIMEOUT_SECONDS) as response:
            body = response.read().decode()
    except urllib.error.HTTPError as error:  # 503: up, not ready
        body = error.read().decode()
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise UsageError(f"no toolrt serve answers at {url}: {reason}") from None
    out.write(body.rstrip("\n") + "\n")
    try:
        ready = json.loads(body).get("ready") is True
    except (ValueError, AttributeError):
        ready = False
    return 0 if ready else 1
