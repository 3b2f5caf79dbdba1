"""Real documents: questions over an installed documentation package (Debian's git-doc), end to end.

    apt-get install git-doc
    .venv/bin/python bench/realdocs.py --out bench/results/realdocs-git-doc.json
    .venv/bin/python bench/realdocs.py --data-dir /tmp/spanqa-git-doc --set chunk_tokens=128 \
        --out bench/results/realdocs-git-doc-chunk128.json

bench/realdocs/git-doc-questions.json holds questions written against the HTML manual of git (the top-level
pages of /usr/share/doc/git-doc: command pages, gitglossary, user-manual...), each with short answers that
occur verbatim on its page. Only the questions and answers are in the repository (the documentation is
GPL-2.0); the pages are read from the installed package, in place: the files under ``root`` matching the
``include`` globs (less ``exclude``) are ingested as they are, nothing is copied. With ``--data-dir`` the
index is kept and a later run re-uses it (unchanged files are not embedded again); a data directory built
with other chunk or retriever settings is refused rather than silently compared.

Each question is searched (``pipeline.search``, top max(10, passages)) and asked (``pipeline.ask``, timed
whole: query encoding, search and reading). Metrics over all questions:

- ``page_top5``: the question's page (or one of its ``also_pages``, which state the same answer) is among
  the first 5 distinct documents of the search results;
- ``chunk_top1/5/10``: a passage of the right page containing one of the answers is within the first
  1/5/10 passages (whitespace collapsed, lowercased; the answer must not be glued to letters or digits on
  either side, so "ort" is not found in "support");
- ``answer_right``: the top answer matches an answer after SQuAD normalization (lowercase, no punctuation,
  no articles): equal, or one contains the other and the shorter has at least half the words of the
  longer ("--force-with-lease" matches "force-with-lease"; "hourly" does not match "on an hourly basis");
  an abstention is wrong. ``answer_any`` applies the same rule to every answer returned;
- ``ask_p50_ms`` / ``ask_p95_ms``: warm ask latency (the reader is loaded before the first timing).

The results break answer_right down by question kind and by ``identifier`` (questions that name, or are
answered by, an exact config variable, option, command or path), and list every miss. ``--set KEY=VALUE``
changes any setting (as ``spanqa.toml`` would) to compare variants; ``--include GLOB`` narrows the pages
ingested (only the questions about those pages are asked), e.g. for a quick smoke test:

    SPANQA_TORCH_THREADS=1 .venv/bin/python bench/realdocs.py --include git-gc.html \
        --include git-daemon.html --include gitglossary.html --limit 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import emit_results, machine, summarize_ms
from bench.realdocs_rules import DEFAULT_QUESTIONS, load_questions, score_question, summarize_outcomes
from spanqa import pipeline
from spanqa.reader.squad import normalize_answer
from spanqa.runtime import Runtime
from spanqa.settings import Settings, SettingsError, setting_names
from spanqa.types import AskOptions, SearchOptions

# Settings that describe where things live, not how questions are answered: left out of the results.
INFRA_SETTINGS = frozenset(
    {
        "data_dir",
        "database_url",
        "qdrant_url",
        "qdrant_api_key",
        "qdrant_timeout_s",
        "broker_url",
        "sweep_interval_s",
        "broker_visibility_timeout_s",
        "document_lock_timeout_s",
        "ask_timeout_s",
        "model_cache_dir",
    }
)
# Settings that shape the index: a kept data directory must have been built with the same values.
INDEX_SETTINGS = ("retriever_model", "retriever_max_seq_length", "chunk_tokens", "chunk_overlap")
INDEX_STAMP = "realdocs-index.json"


def parse_sets(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as Settings overrides (only setting names: not Settings.load's own arguments)."""
    overrides: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().lower()
        if not sep or not key:
            raise SystemExit(f"--set {pair!r}: expected KEY=VALUE")
        if key not in setting_names():
            raise SystemExit(f"--set: unknown setting: {key}")
        overrides[key] = value
    return overrides


def installed_version(package: str) -> str | None:
    try:
        done = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    return done.stdout.strip() or None


def relative_page(path: str, root: Path) -> str:
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError:
        return Path(path).name


def check_index_stamp(data_dir: Path, settings: Settings) -> None:
    """Refuse a kept data directory whose index was built with other chunk or retriever settings."""
    wanted = {name: getattr(settings, name) for name in INDEX_SETTINGS}
    stamp = data_dir / INDEX_STAMP
    if stamp.is_file():
        built = json.loads(stamp.read_text(encoding="utf-8"))
        differ = {k: (built.get(k), v) for k, v in wanted.items() if built.get(k) != v}
        if differ:
            detail = ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in differ.items())
            raise SystemExit(f"{data_dir} was indexed with other settings ({detail}): use another --data-dir")
    else:
        data_dir.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps(wanted) + "\n", encoding="utf-8")


def run(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    meta, questions = load_questions(args.questions)
    root = Path(meta["root"])
    package = meta.get("package", "git-doc")
    if not root.is_dir():
        raise SystemExit(f"{root} not found; run: apt-get install {package}")
    include = list(args.include or meta.get("include", []))
    exclude = list(meta.get("exclude", []))
    try:
        settings = Settings.load(data_dir=data_dir, **parse_sets(args.set))
    except SettingsError as exc:
        raise SystemExit(f"--set: {exc}") from exc
    n_passages = args.passages or settings.passages
    check_index_stamp(settings.data_dir, settings)

    with Runtime(settings) as runtime:
        started = time.perf_counter()
        job = runtime.ingest_job()
        found = job.discover([root], include=include, exclude=exclude)
        if not found:
            raise SystemExit(f"no file under {root} matches --include {include}")
        report = job.run([root], include=include, exclude=exclude)
        ingest_wall = time.perf_counter() - started
        indexed = {relative_page(o.path, root): o.chunks for o in report.outcomes if o.status != "failed"}
        print(
            f"ingest: {len(found)} files {report.summary()}, {report.chunks_embedded} chunks embedded "
            f"in {report.seconds:.1f} s",
            file=sys.stderr,
        )

        asked = [q for q in questions if q.page in indexed]
        skipped = len(questions) - len(asked)
        if args.limit:
            asked = asked[: args.limit]
        if not asked:
            raise SystemExit("no question is about the ingested pages")

        pipeline.ask(
            runtime, asked[0].question, AskOptions(passages=n_passages)
        )  # load the reader: not timed
        outcomes: list[dict[str, bool]] = []
        ask_seconds: list[float] = []
        search_seconds: list[float] = []
        misses = []
        scored: list[tuple[float | None, bool]] = []
        for number, q in enumerate(asked, 1):
            t0 = time.perf_counter()
            found_passages = pipeline.search(
                runtime, q.question, SearchOptions(top_k=max(10, n_passages))
            ).passages
            search_seconds.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            # The best answer whatever its score: answer_right stays comparable across sessions, and the
            # calibration block below scores the min_score setting from the same answers.
            result = pipeline.ask(runtime, q.question, AskOptions(passages=n_passages, min_score=0.0))
            ask_seconds.append(time.perf_counter() - t0)
            outcome, chunk_rank = score_question(
                q,
                [(relative_page(p.path, root), p.text) for p in found_passages],
                [a.text for a in result.answers],
                normalize_answer,
            )
            outcomes.append(outcome)
            top = result.answers[0] if result.answers else None
            scored.append((top.score if top else None, outcome["answer_right"]))
            if not outcome["answer_right"]:
                misses.append(
                    {
                        "id": q.id,
                        "question": q.question,
                        "expected": q.answers,
                        "got": top.text if top else None,
                        "page": q.page,
                        "got_page": relative_page(top.path, root) if top else None,
                        "chunk_rank": chunk_rank,
                        "page_top5": outcome["page_top5"],
                        "kind": q.kind,
                    }
                )
            if number % 10 == 0:
                print(f"asked {number}/{len(asked)}", file=sys.stderr)

    ask_ms = summarize_ms(ask_seconds)
    return {
        "bench": "realdocs",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "package": package,
        "version": meta.get("version"),
        "installed_version": installed_version(package),
        "root": str(root),
        "include": include,
        "exclude": exclude,
        "questions_file": _shown(args.questions),
        "questions": len(asked),
        "questions_skipped": skipped,
        "settings": {k: v for k, v in settings.public_dict().items() if k not in INFRA_SETTINGS},
        "passages": n_passages,
        "ingest": {
            "files": len(found),
            "indexed": len(indexed),
            "failed": [{"path": o.path, "error": o.error} for o in report.failures],
            "summary": report.summary(),
            "chunks": sum(indexed.values()),
            "chunks_embedded": report.chunks_embedded,
            "seconds": round(report.seconds, 1),
            "wall_seconds": round(ingest_wall, 1),
        },
        **summarize_outcomes(asked, outcomes),
        "calibration": calibration_summary(scored, settings.min_score),
        "ask_p50_ms": ask_ms["p50_ms"],
        "ask_p95_ms": ask_ms["p95_ms"],
        "ask_ms": ask_ms,
        "search_ms": summarize_ms(search_seconds),
        "misses": misses,
    }


def calibration_summary(scored: list[tuple[float | None, bool]], min_score: float) -> dict[str, Any]:
    """How the top answers' scores fare on these questions: ECE, and what the min_score setting hides."""
    from spanqa.reader.calibration import expected_calibration_error

    with_answer = [(p, right) for p, right in scored if p is not None]
    shown = [(p, right) for p, right in with_answer if p >= min_score]
    right_total = sum(right for _, right in with_answer)
    return {
        "min_score": min_score,
        "ece": round(expected_calibration_error([p for p, _ in with_answer], [r for _, r in with_answer]), 4),
        "mean_score": round(sum(p for p, _ in with_answer) / max(len(with_answer), 1), 4),
        "answered": round(100.0 * len(shown) / max(len(scored), 1), 1),
        "right_shown": round(100.0 * sum(r for _, r in shown) / max(len(scored), 1), 1),
        "right_kept": round(100.0 * sum(r for _, r in shown) / max(right_total, 1), 1),
        "precision_shown": round(100.0 * sum(r for _, r in shown) / max(len(shown), 1), 1),
    }


def _shown(path: Path) -> str:
    """A path as a result file records it: relative to the repository when inside it."""
    root = Path(__file__).resolve().parents[1]
    resolved = path.resolve()
    return str(resolved.relative_to(root)) if resolved.is_relative_to(root) else str(path)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS, help="The questions JSON.")
    parser.add_argument(
        "--data-dir", type=Path, help="Keep the index here and re-use it (default: a temporary directory)."
    )
    parser.add_argument("--out", type=Path, help="Write the results (and every miss) as JSON here.")
    parser.add_argument("--limit", type=int, help="Ask only the first N questions.")
    parser.add_argument("--passages", type=int, help="Passages read per question (default: settings).")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Override a setting, e.g. chunk_tokens=128 (repeatable).",
    )
    parser.add_argument(
        "--include",
        action="append",
        metavar="GLOB",
        help="Ingest only these pages instead of the file's globs (repeatable); asks only about them.",
    )
    args = parser.parse_args()
    if args.data_dir is not None:
        results = run(args, args.data_dir.expanduser())
    else:
        with tempfile.TemporaryDirectory(prefix="spanqa-realdocs-") as work:
            results = run(args, Path(work) / "data")
    emit_results(results, args.out)


if __name__ == "__main__":
    main()
