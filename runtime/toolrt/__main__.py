"""`python -m toolrt` is the `toolrt` command."""

from __future__ import annotations

import sys

from .faces.cli import main

sys.exit(main())
