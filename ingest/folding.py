"""Near-duplicate folding at ingest: a chunk that nearly repeats one indexed before it (a manual's two
versions, a page copied into another) joins that chunk's group, so that a question reads one of them."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from spanqa.ingest.catalog import Catalog
from spanqa.retriever.index import VectorIndex
from spanqa.types import Chunk

#: Near neighbours weighed per chunk when folding near-duplicates (the nearest may state other numbers).
FOLD_CANDIDATES = 3
#: Chunks of one batch compared with each other at once (a block of cosines, not one row at a time).
FOLD_BLOCK = 512
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def fold_labels(
    index: VectorIndex,
    catalog: Catalog,
    collection: str,
    chunks: Sequence[Chunk],
    vectors: np.ndarray,
    similarity: float,
) -> list[str | None]:
    """Each chunk's near-duplicate group: that of its nearest chunk (indexed, or earlier in ``chunks``)
    whose cosine reaches ``similarity`` (the ``fold_similarity`` setting; above 1: never) and whose text
    states the same numbers; else None."""
    if similarity > 1 or not chunks:
        return [None] * len(chunks)
    threshold = similarity
    indexed = index.search_many(collection, list(vectors), limit=FOLD_CANDIDATES)
    close = {hit.id for hits in indexed for hit in hits if hit.score >= threshold}
    texts = {cid: c.text for cid, c in catalog.get_chunks(close).items()} if close else {}
    labels: list[str | None] = []
    for start in range(0, len(chunks), FOLD_BLOCK):
        stop = min(start + FOLD_BLOCK, len(chunks))
        # Vectors are normalized: dot products are cosines; a chunk is compared with those before it only.
        block = vectors[start:stop] @ vectors[:stop].T
        block[np.triu_indices(stop - start, k=start, m=stop)] = -np.inf
        for row, i in enumerate(range(start, stop)):
            chunk = chunks[i]
            candidates = [
                (hit.score, str(hit.payload.get("fold") or hit.id), texts[hit.id])
                for hit in indexed[i]
                if hit.score >= threshold and hit.id in texts
            ]
            earlier = np.flatnonzero(block[row] >= threshold)
            for j in earlier[np.argsort(-block[row][earlier])][:FOLD_CANDIDATES]:
                candidates.append((float(block[row][j]), labels[j] or chunks[j].id, chunks[j].text))
            label = None
            for _, group, text in sorted(candidates, key=lambda c: -c[0]):
                # Its own earlier version (an unchanged chunk of a changed file) is not a duplicate.
                if group != chunk.id and same_numbers(chunk.text, text):
                    label = group
                    break
            labels.append(label)
    return labels


def same_numbers(a: str, b: str) -> bool:
    """Whether two texts state the same numbers: near-duplicates that differ in a value ("4MB", "64MB"; two
    versions of a manual) say different things and are not folded."""
    return sorted(NUMBER.findall(a)) == sorted(NUMBER.findall(b))
