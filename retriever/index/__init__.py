"""The vector index behind one Protocol: embedded Qdrant Edge (default) or a Qdrant server.

``base`` holds the Protocol, its types, errors and shared helpers; ``edge`` and ``server`` one backend each;
:func:`open_vector_index` picks one from the settings' values.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from spanqa.retriever.index.base import (
    ACTIVE_ALIAS,
    LEXICAL_VECTOR,
    IndexPoint,
    IndexStats,
    SearchFilter,
    SearchHit,
    VectorIndex,
    VectorIndexError,
    VectorIndexInUseError,
    VectorIndexUnavailableError,
    collection_name,
)
from spanqa.retriever.index.edge import EdgeVectorIndex
from spanqa.retriever.index.server import ServerVectorIndex

__all__ = [
    "ACTIVE_ALIAS",
    "LEXICAL_VECTOR",
    "EdgeVectorIndex",
    "IndexPoint",
    "IndexStats",
    "SearchFilter",
    "SearchHit",
    "ServerVectorIndex",
    "VectorIndex",
    "VectorIndexError",
    "VectorIndexInUseError",
    "VectorIndexUnavailableError",
    "collection_name",
    "open_vector_index",
]


def open_vector_index(
    *,
    path: str | Path | None = None,
    url: str | None = None,
    api_key: str | None = None,
    timeout: float = 30.0,
    wait_s: float = 0.0,
    rewait_s: float | None = None,
    on_wait: Callable[[str], None] | None = None,
    quantization: str = "none",
) -> VectorIndex:
    """Open the configured vector index: a Qdrant server if ``url`` is given, else the Edge store at ``path``.

    Args:
        path: Directory of the embedded Qdrant Edge store.
        url: Qdrant server URL (wins over ``path``); ``:memory:`` for an in-process store.
        api_key: API key for the server.
        timeout: Server request timeout in seconds.
        wait_s: how long the embedded store waits for another process that holds it (0: fail at once).
        rewait_s: how long it waits when it takes the store again after ``release()`` (default: ``wait_s``).
        on_wait: told once when that wait has lasted a second.
        quantization: how the vectors of collections created from now on are kept (``VECTOR_QUANTIZATIONS``).

    Returns:
        An open VectorIndex; close it when done.
    """
    if url:
        return ServerVectorIndex(url, api_key=api_key, timeout=timeout, quantization=quantization)
    if path is None:
        raise ValueError("open_vector_index needs a path (Qdrant Edge) or a url (Qdrant server)")
    return EdgeVectorIndex(path, wait_s=wait_s, rewait_s=rewait_s, on_wait=on_wait, quantization=quantization)
