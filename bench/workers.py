"""Background ingest throughput: a folder of many small files through real Celery workers on Redis.

    .venv/bin/python bench/workers.py --files 2000 --workers 1 --out bench/results/workers-1.json
    QDRANT_URL=http://127.0.0.1:6333 .venv/bin/python bench/workers.py --files 2000 --workers 2 \\
        --out bench/results/workers-2.json

Writes ``--files`` text files (one SQuAD v1.1 train paragraph each, CC BY-SA 4.0, read from
$SPANQA_DATASETS and never copied into the repo), starts ``--workers`` worker processes
(``spanqa worker --concurrency 1``) on the Redis broker ``--broker`` and waits until each is ready (models
loaded), then times ``spanqa ingest DIR --background`` from enqueue until the job is done. With
``--inline`` it also times the same folder ingested by ``spanqa ingest`` with no broker, process start and
model load included, as a baseline.

More than one worker process needs a Qdrant server (``QDRANT_URL``): the embedded store has one owner.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import SQUAD_TRAIN, emit_results, machine, squad_articles
from spanqa.ingest.catalog import Catalog
from spanqa.settings import Settings

READY_TIMEOUT_S = 300


def write_paragraph_files(directory: Path, count: int) -> int:
    """Write one SQuAD train paragraph per file; return the characters written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = 0
    index = 0
    for article in squad_articles(SQUAD_TRAIN):
        for paragraph in article["paragraphs"]:
            if index == count:
                return written
            text = paragraph["context"]
            (directory / f"{index:05d}.txt").write_text(text, encoding="utf-8")
            written += len(text)
            index += 1
    raise SystemExit(f"{SQUAD_TRAIN} has only {index} paragraphs; ask for fewer --files")


def _spanqa(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spanqa.cli", *args], env=env, capture_output=True, text=True, check=False
    )


def start_workers(count: int, env: dict[str, str], logs: Path) -> list[subprocess.Popen[bytes]]:
    processes = []
    for number in range(count):
        log = logs / f"worker{number}.log"
        processes.append(
            subprocess.Popen(
                [sys.executable, "-m", "spanqa.cli", "worker", "--concurrency", "1", "--loglevel", "INFO"],
                env=env,
                stdout=log.open("ab"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
    deadline = time.time() + READY_TIMEOUT_S
    for number, process in enumerate(processes):
        log = logs / f"worker{number}.log"
        while " ready." not in log.read_text(errors="replace"):
            if process.poll() is not None or time.time() > deadline:
                stop_workers(processes)
                raise SystemExit(f"worker {number} did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.5)
    return processes


def stop_workers(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def background_ingest(docs: Path, env: dict[str, str], settings: Settings) -> dict[str, Any]:
    """Enqueue the folder and wait for the job; return its timing and counts."""
    started = time.perf_counter()
    enqueued = _spanqa("ingest", str(docs), "--background", "--json", env=env)
    if enqueued.returncode != 0:
        raise SystemExit(f"enqueue failed: {enqueued.stdout}{enqueued.stderr}")
    job_id = json.loads(enqueued.stdout)["job_id"]
    catalog = Catalog(settings.catalog_url)
    try:
        while True:
            job = catalog.get_job(job_id)
            if job is not None and job.state in {"done", "failed"}:
                break
            time.sleep(0.5)
        seconds = time.perf_counter() - started
        return {
            "job_state": job.state,
            "files_done": job.done,
            "files_failed": job.failed,
            "chunks": catalog.counts()["chunks"],
            "seconds": round(seconds, 1),
        }
    finally:
        catalog.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=1, help="Worker processes (concurrency 1 each).")
    parser.add_argument("--broker", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/14"))
    parser.add_argument("--inline", action="store_true", help="Also time an inline ingest as a baseline.")
    parser.add_argument("--out", type=Path, help="Write the results as JSON here too.")
    args = parser.parse_args()
    qdrant_url = os.environ.get("QDRANT_URL") or os.environ.get("SPANQA_QDRANT_URL")
    if args.workers > 1 and not qdrant_url:
        raise SystemExit(
            "more than one worker process needs a Qdrant server: set QDRANT_URL "
            "(the embedded store is owned by one process)"
        )

    import redis

    broker = redis.Redis.from_url(args.broker, socket_timeout=5)
    broker.ping()
    broker.flushdb()
    work = Path(tempfile.mkdtemp(prefix="spanqa-bench-workers-"))
    chars = write_paragraph_files(work / "docs", args.files)
    inherited = {key: value for key, value in os.environ.items() if not key.startswith("SPANQA_")}
    env = {key: value for key, value in inherited.items() if key != "QDRANT_URL"}
    env.update({"SPANQA_DATA_DIR": str(work / "data"), "SPANQA_BROKER_URL": args.broker, "SPANQA_CONFIG": ""})
    # One model cache for both runs: the one-time ONNX export happens while the workers warm up, untimed.
    env["SPANQA_MODEL_CACHE_DIR"] = str(work / "models")
    if qdrant_url:
        env["SPANQA_QDRANT_URL"] = qdrant_url
    settings = Settings.load(environ=env)
    processes = start_workers(args.workers, env, work)
    try:
        background = background_ingest(work / "docs", env, settings)
    finally:
        stop_workers(processes)
    broker.flushdb()
    results: dict[str, Any] = {
        "benchmark": "background ingest",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "retriever_model": settings.retriever_model,
        "vector_store": "qdrant server" if qdrant_url else "qdrant edge (embedded)",
        "worker_processes": args.workers,
        "files": args.files,
        "characters": chars,
        **background,
        "files_per_s": round(background["files_done"] / background["seconds"], 1),
        "chunks_per_s": round(background["chunks"] / background["seconds"], 1),
    }
    if args.inline:
        inline_env = {
            key: value for key, value in env.items() if key not in {"SPANQA_BROKER_URL", "SPANQA_QDRANT_URL"}
        }
        inline_env["SPANQA_DATA_DIR"] = str(work / "data-inline")
        started = time.perf_counter()
        done = _spanqa("ingest", str(work / "docs"), "--json", env=inline_env)
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"inline ingest failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
        results["inline_seconds"] = round(seconds, 1)
        results["inline_files_per_s"] = round(args.files / seconds, 1)
    emit_results(results, args.out)


if __name__ == "__main__":
    main()
