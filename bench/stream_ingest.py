"""Peak memory and pace of one `spanqa ingest` of a million passages: does the ingest stream?

    .venv/bin/python bench/stream_ingest.py --passages 1000000 --quantization int8 \
        --out bench/results/stream-ingest-1m.json

Writes a folder of text files (sentences of SQuAD v1.1 train paragraphs, CC BY-SA 4.0, from
$SPANQA_DATASETS, shuffled into new paragraphs, each file numbered so that no two passages are the same)
holding about ``--passages`` passages of 100 tokens, and ingests it in a new process through spanqa's own
ingest (loading, cutting, near-duplicate folding, BM25 terms, store, catalog, HNSW builds as it goes) at
defaults but for the passage size.

The one stand-in: the vectors come from a hashing encoder (each word adds a fixed pseudo-random vector; 384
dimensions, normalized), because the real encoder would take about three hours for a million passages on 2
cores. What is measured is what grows with the folder: the real encoder's memory does not, and it is
counted all the same: the process loads the shipped encoder and encodes a batch with it before the ingest,
and keeps it loaded throughout. Its pace (chunks/s) is the pipeline's without the encoder's time; add
passages / encoder rate for a real run.

Reports: peak RSS of the ingesting process and of the child processes that build the HNSW graph, RSS
sampled over the run (flat when the ingest streams), seconds by stage, HNSW builds, store size on disk.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import SQUAD_TRAIN, emit_results, machine, squad_articles

DIMENSION = 384
#: Buckets of the hashing trick: a fixed table of 6 MB, whatever the vocabulary.
BUCKETS = 4096
#: Passages per file (a long manual page).
PASSAGES_PER_FILE = 50
#: Words per 100-token passage advanced (80 new tokens each, 20 overlap; ~1.3 word pieces per word).
WORDS_PER_PASSAGE = 62
_WORD = re.compile(r"\w+")


class HashingEncoder:
    """A stand-in for the bi-encoder, of its shape: each word adds one of ``BUCKETS`` fixed random vectors."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self._table = np.random.default_rng(7).standard_normal((BUCKETS, DIMENSION)).astype(np.float32)

    model_name = "bench-hashing-encoder-384"
    pooling = "mean"
    dimension = DIMENSION
    max_seq_length = 256

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def warm_up(self) -> None:
        return None

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        for row, text in enumerate(texts):
            buckets = [zlib.crc32(w.encode()) % BUCKETS for w in _WORD.findall(text.lower())]
            if buckets:
                out[row] = self._table[buckets].sum(axis=0)
        out /= np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-12, None)
        return out


def write_folder(folder: Path, passages: int, seed: int = 11) -> tuple[int, int]:
    """Files of shuffled SQuAD train sentences holding about ``passages`` passages: (files, characters)."""
    sentences = [
        s.strip()
        for article in squad_articles(SQUAD_TRAIN)
        for paragraph in article["paragraphs"]
        for s in re.split(r"(?<=[.!?])\s+", paragraph["context"])
        if len(s.split()) >= 5
    ]
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    words_left = passages * WORDS_PER_PASSAGE
    files = characters = 0
    while words_left > 0:
        paragraphs = []
        words = 0
        section = 0
        while words < PASSAGES_PER_FILE * WORDS_PER_PASSAGE:
            section += 1
            body = " ".join(rng.choice(sentences) for _ in range(6))
            paragraphs.append(f"Section {files}.{section}. {body}")
            words += len(paragraphs[-1].split())
        text = "\n\n".join(paragraphs)
        sub = folder / f"part{files // 1000:03d}"
        sub.mkdir(exist_ok=True)
        (sub / f"page{files:06d}.txt").write_text(text, encoding="utf-8")
        files += 1
        characters += len(text)
        words_left -= words
    return files, characters


def _rss_split_mb() -> dict[str, float]:
    """This process's resident memory now: anonymous (its own) and file-backed (mapped pages of the store's
    files, which the kernel can drop)."""
    split = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("RssAnon:", "RssFile:")):
                split[line.split(":")[0].lower()] = round(int(line.split()[1]) / 1024, 1)
    return split


def _rss_mb() -> float:
    return sum(_rss_split_mb().values())


def child(folder: Path, data_dir: Path, quantization: str) -> None:
    """Ingest ``folder`` in this process; print one JSON line of what it measured."""
    from spanqa.runtime import Runtime
    from spanqa.settings import Settings

    settings = Settings.load(
        environ={}, data_dir=data_dir, chunk_tokens=100, chunk_overlap=20, vector_quantization=quantization
    )
    samples: list[dict[str, float]] = []
    progress = {"files": 0, "chunks": 0}
    started = time.perf_counter()
    done = threading.Event()

    def sample() -> None:
        while not done.wait(20):
            samples.append(
                {
                    "seconds": round(time.perf_counter() - started, 1),
                    "chunks": progress["chunks"],
                    "rss_mb": round(_rss_mb(), 1),
                }
            )

    with Runtime(settings) as runtime:
        real = runtime.encoder  # the shipped encoder, loaded and used once: its memory stays counted
        real.encode(["The Broncos defeated the Panthers to win their third Super Bowl title. " * 8] * 64)
        rss_with_encoder = _rss_mb()
        runtime._encoder = HashingEncoder(real.tokenizer)
        job = runtime.ingest_job()
        builds: list[int] = []
        job.on_build = builds.append

        def on_progress(event: Any) -> None:
            progress["files"], progress["chunks"] = event.files_done, event.chunks_done
            if event.files_done % 1000 == 0:
                rate = round(event.chunks_done / (time.perf_counter() - started), 1)
                line = {"files": event.files_done, "chunks": event.chunks_done, "rate": rate}
                line["rss_mb"] = round(_rss_mb())
                print(
                    json.dumps(line),
                    file=sys.stderr,
                    flush=True,
                )

        threading.Thread(target=sample, daemon=True).start()
        report = job.run([folder], on_progress=on_progress)
        done.set()
        rss_at_end = _rss_split_mb()
        counts = runtime.catalog.counts()
        stats = runtime.index.stats(job.active_collection())
    store_bytes = sum(f.stat().st_size for f in (data_dir / "qdrant").rglob("*") if f.is_file())
    print(
        json.dumps(
            {
                "files": len(report.outcomes),
                "failed": report.count("failed"),
                "chunks": counts["chunks"],
                "points": stats.points,
                "indexed": stats.indexed,
                "seconds": round(report.seconds, 1),
                "chunks_per_s": round(report.chunks_per_second, 1),
                "stage_seconds": {k: round(v, 1) for k, v in report.stage_seconds.items()},
                "hnsw_builds": len(builds),
                "hnsw_build_seconds": round(report.index_build_seconds, 1),
                "hnsw_build_note": report.index_build_note,
                "rss_after_real_encoder_mb": round(rss_with_encoder, 1),
                "rss_at_end_mb": rss_at_end,
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                # A child's ru_maxrss starts from its parent's peak at the spawn (Linux folds the borrowed
                # memory's high-water mark in at exec): the builder's own where above this process's peak.
                "peak_rss_graph_builder_mb": round(
                    resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1
                ),
                "rss_samples": samples,
                "store_mb": round(store_bytes / 2**20, 1),
            }
        )
    )


def asker(data_dir: Path, quantization: str, questions: int) -> None:
    """Open the store in this new process, ask ``questions`` SQuAD train questions (dense with the stand-in
    encoder, lexical with BM25); print one JSON line: p50 / p95 ms of each, and this process's peak RSS."""
    from bench.common import summarize_ms
    from spanqa.retriever.index import EdgeVectorIndex
    from spanqa.retriever.lexical import Bm25Encoder
    from spanqa.runtime import Runtime
    from spanqa.settings import Settings

    texts = [qa["question"] for a in squad_articles(SQUAD_TRAIN) for p in a["paragraphs"] for qa in p["qas"]]
    sample = random.Random(3).sample(texts, questions)
    settings = Settings.load(environ={}, data_dir=data_dir)
    with Runtime(settings) as runtime:
        encoder = HashingEncoder(runtime.encoder.tokenizer)
    store = data_dir / "qdrant"
    with EdgeVectorIndex(store, quantization=quantization) as index:
        collection = next(name for name in index.list_collections() if name.startswith("chunks"))
        bm25 = Bm25Encoder()
        dense, lexical = [], []
        for question in sample:
            vector = encoder.encode([question])[0]
            started = time.perf_counter()
            index.search(collection, vector, limit=10)
            dense.append(time.perf_counter() - started)
            query = bm25.query(question)
            started = time.perf_counter()
            index.search_lexical(collection, query, limit=10)
            lexical.append(time.perf_counter() - started)
    print(
        json.dumps(
            {
                "questions": questions,
                "dense_ms": summarize_ms(dense),
                "lexical_ms": summarize_ms(lexical),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "rss_at_end_mb": _rss_split_mb(),
            }
        )
    )


class MemoryCgroup:
    """A new memory cgroup (v2 where its memory controller is on, else v1) with a hard limit: what the ingest
    and the graph builders it starts must fit in together, the page cache of the files they read and write
    included (the kernel reclaims that first). Needs root."""

    def __init__(self, limit_mb: int) -> None:
        unified = Path("/sys/fs/cgroup")
        controllers = unified / "cgroup.controllers"
        self.v2 = controllers.is_file() and "memory" in controllers.read_text().split()
        name = f"spanqa-bench-{os.getpid()}"
        self.path = unified / name if self.v2 else unified / "memory" / name
        self.path.mkdir()
        (self.path / ("memory.max" if self.v2 else "memory.limit_in_bytes")).write_text(str(limit_mb * 2**20))

    def enter(self) -> None:
        """Move the calling process in (a ``preexec_fn``: the child joins before it runs anything)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def report(self) -> dict[str, Any]:
        """Peak usage (page cache included), OOM kills and times the limit was hit; then remove the group."""

        def read(name: str) -> str:
            return (self.path / name).read_text()

        result: dict[str, Any]
        if self.v2:
            events = dict(line.split() for line in read("memory.events").splitlines())
            peak = int(read("memory.peak")) if (self.path / "memory.peak").exists() else None
            result = {"oom_kills": int(events.get("oom_kill", 0)), "limit_hits": int(events.get("max", 0))}
        else:
            oom = dict(line.split() for line in read("memory.oom_control").splitlines())
            peak = int(read("memory.max_usage_in_bytes"))
            result = {"oom_kills": int(oom.get("oom_kill", 0)), "limit_hits": int(read("memory.failcnt"))}
        result["peak_mb"] = round(peak / 2**20, 1) if peak is not None else None
        # A graph builder outlives an ingest killed for memory: end it before the group can go.
        for pid in read("cgroup.procs").split():
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)
        for _ in range(50):
            try:
                self.path.rmdir()
                break
            except OSError:
                time.sleep(0.1)
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=1_000_000)
    parser.add_argument("--quantization", default="int8", help="vector_quantization of the collection")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a new temporary one)")
    parser.add_argument("--child", nargs=3, metavar=("DOCS", "DATA", "QUANT"), help=argparse.SUPPRESS)
    parser.add_argument("--questions", type=int, default=200, help="asked of the store after the ingest")
    parser.add_argument("--asks-only", action="store_true", help="only ask, of the store in --work")
    parser.add_argument("--asker", nargs=2, metavar=("DATA", "QUANT"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--memory-limit",
        type=int,
        metavar="MB",
        help="run the ingest, graph builds included, in a new memory cgroup with this hard limit (root)",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), Path(args.child[1]), args.child[2])
        return
    if args.asker:
        asker(Path(args.asker[0]), args.asker[1], args.questions)
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="spanqa-stream-"))
    measured: dict[str, Any] = {}
    files = characters = 0
    written_s = 0.0
    if not args.asks_only:
        started = time.perf_counter()
        files, characters = write_folder(work / "docs", args.passages)
        written_s = time.perf_counter() - started
        cgroup = MemoryCgroup(args.memory_limit) if args.memory_limit else None
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(work / "docs"), str(work / "data"), args.quantization],
            stdout=subprocess.PIPE,
            text=True,
            check=False,
            preexec_fn=cgroup.enter if cgroup else None,
        )
        limited = cgroup.report() if cgroup else None
        if done.returncode != 0:
            sys.exit(f"the ingest failed (exit status {done.returncode}); memory cgroup: {limited}")
        measured = json.loads(done.stdout.strip().splitlines()[-1])
        if limited is not None:
            measured["memory_cgroup"] = {"limit_mb": args.memory_limit, **limited}
    asked = subprocess.run(
        [
            sys.executable,
            __file__,
            "--asker",
            str(work / "data"),
            args.quantization,
            "--questions",
            str(args.questions),
        ],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    measured["asks"] = json.loads(asked.stdout.strip().splitlines()[-1])
    emit_results(
        {
            "bench": "stream_ingest",
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine(),
            "passages_asked": args.passages,
            "vector_quantization": args.quantization,
            "folder": {"files": files, "characters": characters, "seconds_to_write": round(written_s, 1)},
            **measured,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
