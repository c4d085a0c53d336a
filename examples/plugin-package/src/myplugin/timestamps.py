"""Handler of the `timestamp` tool: convert between Unix time and ISO 8601, in any IANA time zone."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from toolrt import ToolContext, ToolFailure


def timestamp(args: Mapping[str, Any], ctx: ToolContext) -> str:
    """`value` (Unix seconds, or an ISO 8601 date-time) shown both ways, in `zone` (default UTC).

    A plain function: toolrt runs sync handlers in a worker thread, so it may block briefly.
    """
    zone_name = args.get("zone", "UTC")
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolFailure(
            f"Unknown time zone {zone_name!r}. Use an IANA name such as 'UTC', 'Europe/Paris' or 'America/New_York'."
        ) from None
    value = str(args["value"]).strip()
    try:
        moment = datetime.fromtimestamp(float(value), tz=timezone.utc)
    except ValueError:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ToolFailure(
                f"Cannot read {value!r} as a time. Give Unix seconds (1700000000) "
                "or ISO 8601 (2024-05-01T12:00:00+02:00)."
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=zone)
    except (OverflowError, OSError):
        raise ToolFailure(f"{value} is out of the range of representable times (years 1-9999).") from None
    local = moment.astimezone(zone)
    return f"unix: {local.timestamp():.0f}\niso: {local.isoformat()}\nzone: {zone_name}\nweekday: {local:%A}"
