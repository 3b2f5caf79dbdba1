"""spanqa: two-stage extractive question answering over your own documents."""

from __future__ import annotations

__version__ = "0.1.0"
