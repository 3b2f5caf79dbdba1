"""Build an Edge shard's HNSW graph in a child process.

Edge's ``optimize()`` holds the GIL for the whole build (minutes at a million vectors), so it runs here, in a
process of its own, on a copy of the collection: the process that asked for it goes on answering, and so do
other processes, since the copy is outside the store's lock (see ``EdgeVectorIndex.build_search_index``).

Run as ``python -m spanqa.retriever.index.edge_optimize SHARD_DIR``; it prints ``{"built": true|false}``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from spanqa.errors import first_line


def optimize_shard(directory: str | Path) -> bool:
    """Load the shard in ``directory``, run Edge's optimizers on it and close it; True when it built any."""
    import qdrant_edge

    shard = qdrant_edge.EdgeShard.load(str(directory))
    try:
        built = bool(shard.optimize())
        shard.flush()
    finally:
        shard.close()
    return built


def optimize_in_child(directory: str | Path) -> bool:
    """:func:`optimize_shard` in a child process (its own GIL).

    Raises:
        RuntimeError: the child failed; the message is its last line of error.
    """
    done = subprocess.run(
        [sys.executable, "-m", __name__, str(directory)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        raise RuntimeError(first_line(lines[-1]) if lines else f"exit status {done.returncode}")
    return bool(json.loads(done.stdout.strip().splitlines()[-1])["built"])


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m spanqa.retriever.index.edge_optimize SHARD_DIR", file=sys.stderr)
        return 2
    print(json.dumps({"built": optimize_shard(argv[0])}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
