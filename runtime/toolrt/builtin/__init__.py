"""Handlers of the built-in tools declared in tools.d/ (one module per tool, helpers beside them)."""

from __future__ import annotations
