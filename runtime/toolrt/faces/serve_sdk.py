"""The `mcp` SDK's server side for `toolrt serve`, without its client side.

The SDK's package `__init__` imports its client (`Client`, `ClientSession`, `stdio_client`, the session
group and their transports) for its top-level names, and Python runs a package's `__init__` before any of
its submodules: every `import mcp.server.…` loaded the whole client, which a server never uses (about a
tenth of `toolrt serve`'s import time). `defer_client_side` registers the `mcp` package without running
its `__init__` yet, so `mcp.server.…` and `mcp.shared.…` import alone; the first access to a top-level
name (`from mcp import Client`, `mcp.types`) runs the `__init__` then, so whatever else in the process
uses the package finds all of it.

Importing this module defers it: `serve.py` imports it before any module that imports the SDK (a test of
`toolrt serve`'s start holds that). It imports nothing of the SDK itself.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from typing import Any

PACKAGE = "mcp"


def defer_client_side() -> None:
    """Register the `mcp` package with its `__init__` deferred to the first access of one of its names.

    Does nothing when the package is imported already, or is not installed (its own import then fails
    as it would have).
    """
    if PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return
    package = importlib.util.module_from_spec(spec)  # `__path__` set: its submodules import without it
    loader = spec.loader
    lock = threading.Lock()

    def load_init(name: str) -> Any:
        """PEP 562's module `__getattr__`: run the package's `__init__` (once), then look `name` up."""
        with lock:
            if vars(package).pop("__getattr__", None) is not None:
                loader.exec_module(package)
        return getattr(package, name)

    package.__getattr__ = load_init  # type: ignore[method-assign]
    sys.modules[PACKAGE] = package


defer_client_side()
