"""An example toolrt plugin: `TOOLS_DIR` is what the `toolrt.tools` entry point names."""

from __future__ import annotations

from pathlib import Path

__all__ = ["TOOLS_DIR"]

TOOLS_DIR = Path(__file__).resolve().parent / "tools.d"
"""The directory of this plugin's tool YAML files, shipped inside the package (so inside the wheel)."""
