"""`spanqa serve` under load: latency (p50, p95) and throughput of POST /ask at 1, 4 and 20 clients.

    .venv/bin/python bench/serve.py --data-dir /tmp/cold --out bench/results/serve.json

Serves the index in ``--data-dir`` (e.g. the 1,000-document one bench/cold_ask.py builds, or any folder you
ingested) with the shipped models from a real `spanqa serve` process, then sends SQuAD train questions
(CC BY-SA 4.0, from $SPANQA_DATASETS) over HTTP from 1, 4 and 20 client threads at once, ``--questions`` per
level after a warm-up. Each client waits for its answer before asking again (closed loop), so throughput is
what the server sustains and latency includes the time a question waits in the server's queue.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import random
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import SQUAD_TRAIN, emit_results, machine, squad_articles, summarize_ms

SPANQA = Path(sys.executable).with_name("spanqa")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def questions(count: int, seed: int = 7) -> list[str]:
    """Questions of the first SQuAD train articles (those bench/cold_ask.py indexes)."""
    asked = [
        qa["question"]
        for article in squad_articles(SQUAD_TRAIN)[:40]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ]
    return random.Random(seed).sample(asked, count)


def run_level(url: str, clients: int, asked: list[str]) -> dict[str, object]:
    """Ask ``asked`` from ``clients`` threads at once; latency of each and the overall throughput."""
    latencies: list[float] = []
    errors = 0

    def one(question: str) -> None:
        nonlocal errors
        started = time.perf_counter()
        response = httpx.post(f"{url}ask", json={"question": question}, timeout=120)
        latencies.append(time.perf_counter() - started)
        if response.status_code != 200:
            errors += 1

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(one, asked))
    wall = time.perf_counter() - started
    return {
        "clients": clients,
        **summarize_ms(latencies),
        "questions_per_second": round(len(asked) / wall, 2),
        "errors": errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="a folder holding a .spanqa index")
    parser.add_argument("--questions", type=int, default=60, help="questions per concurrency level")
    parser.add_argument("--levels", default="1,4,20")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    port = _free_port()
    url = f"http://127.0.0.1:{port}/"
    env = {**os.environ, "SPANQA_SERVE_QUEUE": "64"}
    server = subprocess.Popen(
        [str(SPANQA), "serve", "--port", str(port)], cwd=args.data_dir, env=env, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.time() + 120
        while True:
            try:
                health = httpx.get(f"{url}health", timeout=2).json()
                break
            except httpx.HTTPError:
                if server.poll() is not None or time.time() > deadline:
                    raise SystemExit("spanqa serve did not start") from None
                time.sleep(0.2)
        levels = [int(level) for level in args.levels.split(",")]
        pool = questions(args.questions * (len(levels) + 1))
        run_level(url, 4, pool[: args.questions])  # warm-up: thread pools, caches
        results = [
            run_level(url, clients, pool[(i + 1) * args.questions : (i + 2) * args.questions])
            for i, clients in enumerate(levels)
        ]
    finally:
        server.terminate()
        server.wait(timeout=30)
    emit_results(
        {
            "bench": "serve",
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine(),
            "index": {"documents": health["documents"], "chunks": health["chunks"]},
            "serve_concurrency": int(os.environ.get("SPANQA_SERVE_CONCURRENCY", "2")),
            "questions_per_level": args.questions,
            "levels": results,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
