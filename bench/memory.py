"""Peak memory of `spanqa ingest` over many small files, and of a file past the size limit.

    .venv/bin/python bench/memory.py --files 10000 --out bench/results/memory.json

Writes ``--files`` .txt files (one SQuAD v1.1 train paragraph each, CC BY-SA 4.0, from $SPANQA_DATASETS)
into a fresh folder and ingests them with the shipped models in a new `spanqa ingest` process; the peak
resident memory of that process (``ru_maxrss`` of the child) is the number. Then a 100 MB text file is
ingested the same way: `max_file_mb` (20 MB by default) refuses it before reading, so its peak stays at the
process's baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cold_ask import write_documents
from bench.common import emit_results, machine

SPANQA = Path(sys.executable).with_name("spanqa")


def ingest_peak(folder: Path, data_dir: Path) -> dict[str, object]:
    """Ingest ``folder`` in a new process; its peak RSS (MB), wall seconds and summary."""
    env = {**os.environ, "SPANQA_DATA_DIR": str(data_dir)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    done = subprocess.run(
        [str(SPANQA), "ingest", str(folder), "--json"], env=env, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if peak <= before:
        raise SystemExit("this peak is hidden by an earlier, larger one: measure one ingest per process")
    report = json.loads(done.stdout)
    return {
        "peak_rss_mb": round(peak / 1024, 1),
        "seconds": round(wall, 1),
        "exit_code": done.returncode,
        "summary": report["summary"],
        "chunks_embedded": report["chunks_embedded"],
        "failed": [f for f in report["files"] if f.get("status") == "failed"][:3],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--big-mb", type=int, default=100)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        big = root / "big"
        big.mkdir()
        line = "The Denver Broncos defeated the Carolina Panthers at Levi's Stadium in Santa Clara.\n"
        with (big / "manual.txt").open("w") as fh:
            for _ in range(args.big_mb * 1_000_000 // len(line)):
                fh.write(line)
        big_result = ingest_peak(big, root / "data-big")  # the smaller process first: its peak stays visible
        write_documents(root / "docs", args.files)
        many = ingest_peak(root / "docs", root / "data-many")
    emit_results(
        {
            "bench": "memory",
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine(),
            "many_small_files": {"files": args.files, **many},
            "one_big_file": {"megabytes": args.big_mb, **big_result},
        },
        args.out,
    )


if __name__ == "__main__":
    main()
