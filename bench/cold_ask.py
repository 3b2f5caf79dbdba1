"""A cold `spanqa ask`: from process start to printed answer, on a 1,000-document index.

    .venv/bin/python bench/cold_ask.py --data-dir /tmp/cold --runs 10 --out bench/results/cold-ask.json

The index holds one .txt file per SQuAD v1.1 train paragraph (CC BY-SA 4.0, read from $SPANQA_DATASETS),
the first ``--documents`` of them, ingested once with the default settings (the data dir is reused when it
already holds them). Each run is a new `spanqa ask` process; the first, untimed, fills the per-user model
cache as a user's first question does. One more run under ``python -X importtime`` lists the imports that
cost most (cumulative, top-level packages), the evidence for what start-up still pays for.

``--before CHECKOUT`` times another checkout of spanqa (its code put first on PYTHONPATH) over the same
index, taking turns run by run, so that a machine whose speed drifts slows both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import SQUAD_TRAIN, emit_results, machine, squad_articles, summarize_ms

QUESTION = "What sits on top of the Main Building at Notre Dame?"  # the first article of SQuAD train
SPANQA = Path(sys.executable).with_name("spanqa")


def write_documents(folder: Path, count: int) -> None:
    """One .txt file per SQuAD train paragraph, titled by its article."""
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    for article in squad_articles(SQUAD_TRAIN):
        title = article["title"].replace("_", " ")
        for number, paragraph in enumerate(article["paragraphs"]):
            path = folder / f"{article['title'][:40]}-{number:03d}.txt"
            path.write_text(f"{title}\n\n{paragraph['context']}\n", encoding="utf-8")
            written += 1
            if written >= count:
                return


def run_ask(
    data_dir: Path, question: str, *, python_flags: tuple[str, ...] = (), checkout: Path | None = None
) -> tuple[float, str, str]:
    """One cold `spanqa ask` in ``data_dir`` (of ``checkout``'s code when given): (wall s, stdout, stderr)."""
    command = (
        [sys.executable, *python_flags, "-m", "spanqa.cli", "ask", question]
        if python_flags
        else [str(SPANQA), "ask", question]
    )
    env = dict(os.environ)
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=data_dir, capture_output=True, text=True, check=True, env=env)
    return time.perf_counter() - started, done.stdout, done.stderr


def top_imports(importtime: str, limit: int = 15) -> list[dict[str, object]]:
    """The costliest top-level imports of a ``-X importtime`` log (cumulative ms)."""
    rows = []
    for line in importtime.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line[len("import time:") :].split("|")
        if not name.startswith(" ") or name.startswith("  "):
            continue  # only packages the program itself imported (nesting depth 0)
        rows.append({"module": name.strip(), "ms": round(int(cumulative) / 1000, 1)})
    return sorted(rows, key=lambda row: -float(str(row["ms"])))[:limit]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="where the index is built (reused)")
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--before", type=Path, help="another checkout to time in turns with this one")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    folder = args.data_dir / "docs"
    if not (args.data_dir / ".spanqa").is_dir():
        write_documents(folder, args.documents)
        subprocess.run([str(SPANQA), "ingest", str(folder)], cwd=args.data_dir, check=True)
    status = json.loads(
        subprocess.run(
            [str(SPANQA), "status", "--json"], cwd=args.data_dir, capture_output=True, text=True, check=True
        ).stdout
    )
    run_ask(args.data_dir, args.question)  # fills the per-user model cache, as a first question does
    if args.before:
        run_ask(args.data_dir, args.question, checkout=args.before)
    seconds: list[float] = []
    before: list[float] = []
    for _ in range(args.runs):
        wall, answer, _ = run_ask(args.data_dir, args.question)
        seconds.append(wall)
        if args.before:
            before.append(run_ask(args.data_dir, args.question, checkout=args.before)[0])
    _, _, importtime = run_ask(args.data_dir, args.question, python_flags=("-X", "importtime"))
    results = {
        "bench": "cold_ask",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "threads_env": {k: v for k, v in os.environ.items() if k.startswith("SPANQA_")},
        "index": {key: status.get(key) for key in ("documents", "chunks", "vectors") if key in status},
        "question": args.question,
        "first_answer_line": answer.splitlines()[0] if answer else "",
        "process_start_to_answer": summarize_ms(seconds),
        "runs_ms": [round(s * 1000, 1) for s in seconds],
        **(
            {"before": {"checkout": str(args.before), "process_start_to_answer": summarize_ms(before)}}
            if args.before
            else {}
        ),
        "top_imports": top_imports(importtime),
    }
    emit_results(results, args.out)


if __name__ == "__main__":
    main()
