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
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import emit_results, machine, summarize_ms
from reader.squad import normalize_answer
from spanqa import pipeline
from spanqa.runtime import Runtime
from spanqa.settings import Settings, SettingsError, setting_names

DEFAULT_QUESTIONS = Path(__file__).resolve().parent / "realdocs" / "git-doc-questions.json"
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
INDEX_SETTINGS = ("retriever_model", "retriever_max_seq_len", "chunk_tokens", "chunk_overlap")
INDEX_STAMP = "realdocs-index.json"
METRICS = ("page_top5", "chunk_top1", "chunk_top5", "chunk_top10", "answer_right", "answer_any")


@dataclass
class Question:
    id: str
    question: str
    answers: list[str]
    page: str
    kind: str
    identifier: bool = False
    also_pages: list[str] = field(default_factory=list)

    @property
    def pages(self) -> set[str]:
        return {self.page, *self.also_pages}


def load_questions(path: Path) -> tuple[dict[str, Any], list[Question]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{path}: cannot read the questions ({exc})") from exc
    fields = set(Question.__dataclass_fields__)
    questions = [Question(**{k: v for k, v in q.items() if k in fields}) for q in data["questions"]]
    return data, questions


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


def collapse(text: str) -> str:
    return " ".join(text.split()).lower()


def contains_answer(passage_text: str, answers: list[str]) -> bool:
    """One of ``answers`` occurs in the passage, not glued to a letter or digit on either side."""
    text = collapse(passage_text)
    for answer in map(collapse, answers):
        if not answer:
            continue
        before = r"(?<![0-9a-z])" if answer[0].isalnum() else ""
        after = r"(?![0-9a-z])" if answer[-1].isalnum() else ""
        if re.search(before + re.escape(answer) + after, text):
            return True
    return False


def answer_matches(prediction: str, answers: list[str]) -> bool:
    """The rule of ``answer_right``: normalized equal, or containment with at least half the words."""
    got = normalize_answer(prediction)
    if not got:
        return False
    for answer in answers:
        gold = normalize_answer(answer)
        if not gold:
            continue
        if got == gold:
            return True
        shorter, longer = sorted((got, gold), key=len)
        if shorter in longer and 2 * len(shorter.split()) >= len(longer.split()):
            return True
    return False


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


def rate(hits: int, total: int) -> float:
    return round(100 * hits / total, 1) if total else float("nan")


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

        pipeline.ask(runtime, asked[0].question, passages=n_passages)  # load the reader: not timed
        hits: dict[str, int] = defaultdict(int)
        by_kind: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        ask_seconds: list[float] = []
        search_seconds: list[float] = []
        misses = []
        for number, q in enumerate(asked, 1):
            t0 = time.perf_counter()
            found_passages = pipeline.search(runtime, q.question, top_k=max(10, n_passages)).passages
            search_seconds.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            result = pipeline.ask(runtime, q.question, passages=n_passages)
            ask_seconds.append(time.perf_counter() - t0)

            documents: list[str] = []
            for p in found_passages:
                page = relative_page(p.path, root)
                if page not in documents:
                    documents.append(page)
            page_hit = bool(q.pages & set(documents[:5]))
            chunk_rank = next(
                (
                    rank
                    for rank, p in enumerate(found_passages, 1)
                    if relative_page(p.path, root) in q.pages and contains_answer(p.text, q.answers)
                ),
                None,
            )
            top = result.answers[0] if result.answers else None
            right = top is not None and answer_matches(top.text, q.answers)
            any_right = any(answer_matches(a.text, q.answers) for a in result.answers)
            outcome = {
                "page_top5": page_hit,
                "chunk_top1": chunk_rank is not None and chunk_rank <= 1,
                "chunk_top5": chunk_rank is not None and chunk_rank <= 5,
                "chunk_top10": chunk_rank is not None and chunk_rank <= 10,
                "answer_right": right,
                "answer_any": any_right,
            }
            for name, value in outcome.items():
                hits[name] += value
            for group in (f"kind:{q.kind}", "identifier" if q.identifier else "not_identifier"):
                by_kind[group]["questions"] += 1
                by_kind[group]["answer_right"] += right
                by_kind[group]["chunk_top5"] += outcome["chunk_top5"]
            if not right:
                misses.append(
                    {
                        "id": q.id,
                        "question": q.question,
                        "expected": q.answers,
                        "got": top.text if top else None,
                        "page": q.page,
                        "got_page": relative_page(top.path, root) if top else None,
                        "chunk_rank": chunk_rank,
                        "page_top5": page_hit,
                        "kind": q.kind,
                    }
                )
            if number % 10 == 0:
                print(f"asked {number}/{len(asked)}", file=sys.stderr)

    total = len(asked)
    ask_ms = summarize_ms(ask_seconds)
    breakdown = {
        group: {
            "questions": counts["questions"],
            "answer_right": rate(counts["answer_right"], counts["questions"]),
            "chunk_top5": rate(counts["chunk_top5"], counts["questions"]),
        }
        for group, counts in sorted(by_kind.items())
    }
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
        "questions_file": str(args.questions),
        "questions": total,
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
        **{
            name: rate(hits[name], total) for name in ("page_top5", "chunk_top1", "chunk_top5", "chunk_top10")
        },
        "answer_right": rate(hits["answer_right"], total),
        "answer_any": rate(hits["answer_any"], total),
        "ask_p50_ms": ask_ms["p50_ms"],
        "ask_p95_ms": ask_ms["p95_ms"],
        "ask_ms": ask_ms,
        "search_ms": summarize_ms(search_seconds),
        "breakdown": breakdown,
        "misses": misses,
    }


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
