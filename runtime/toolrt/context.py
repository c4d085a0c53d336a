"""Where `ToolContext` lived in 0.1: handlers written then (and the `starter_tools.py` that
`toolrt init` wrote) import it from here. Import it from the package instead:
`from toolrt import ToolContext`.
"""

from __future__ import annotations

import warnings

from .call.context import ToolContext

__all__ = ["ToolContext"]

warnings.warn(
    "toolrt.context is deprecated: import ToolContext from toolrt (from toolrt import ToolContext)",
    DeprecationWarning,
    stacklevel=2,
)
