"""``spanqa eval docs``: measure spanqa on your own documents with your own questions.

The questions file (JSON) is an object with a ``questions`` list, or the list itself, or JSON lines. Each
question::

    {"id": "q1",                        optional; the line number otherwise
     "question": "What is the default value of maxconn?",
     "answers": ["2000", "2,000"],       acceptable answers; [] (or "unanswerable": true) when the documents
                                         do not answer it
     "file": "haproxy/configuration.html", optional: the file that answers it, as a path relative to the
                                         folder it was ingested from, a tail of that path, or absolute
     "offset": 12345}                    optional: where answers[0] starts in spanqa's text of that file

The documents must already be ingested into the data folder. Each question is searched and asked once with
``min_score`` 0, so every threshold can be scored from one run. An answer is right when, after SQuAD's
normalization, it equals an acceptable answer or one contains the other and the shorter has at least half
the words of the longer ("--force" matches "force"; "hourly" does not match "on an hourly basis").
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from xml.sax.saxutils import escape

from spanqa import pipeline
from spanqa.errors import first_line
from spanqa.evaluation import EvalReport, EvaluationError, contains_answer, percentiles
from spanqa.reader.calibration import WEIGHTS_KEY, ece_noise_floor, expected_calibration_error, reliability
from spanqa.reader.squad import answer_matches
from spanqa.runtime import Runtime
from spanqa.types import AskOptions, Document, Passage, SearchOptions

#: Passage ranks reported.
RANKS = (1, 5, 10)
#: One question's outcome, as written to questions.jsonl.
Record = dict[str, Any]


@dataclass(frozen=True)
class DocQuestion:
    """One question of a questions file."""

    id: str
    question: str
    answers: tuple[str, ...]
    file: str | None = None
    offset: int | None = None
    hard: bool = False

    @property
    def answerable(self) -> bool:
        return bool(self.answers)


def read_doc_questions(path: str | Path) -> list[DocQuestion]:
    """The questions of a file in the documented shape (see the module docstring).

    Raises:
        EvaluationError: the file cannot be read or a question is malformed (which one is named).
    """
    source = Path(path)
    try:
        raw = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise EvaluationError(f"cannot read {source}: {first_line(exc)}") from exc
    try:
        data: Any = json.loads(raw)
    except ValueError:
        try:
            data = [json.loads(line) for line in raw.splitlines() if line.strip()]
        except ValueError as exc:
            raise EvaluationError(f"{source} is neither JSON nor JSON lines: {first_line(exc)}") from exc
    items = data.get("questions") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise EvaluationError(f"{source}: expected a list of questions or an object with 'questions'")
    questions = []
    seen: set[str] = set()
    for number, item in enumerate(items, 1):
        where = f"{source}: question {number}"
        if not isinstance(item, dict) or not isinstance(item.get("question"), str):
            raise EvaluationError(f"{where}: needs a 'question' string")
        answers = item.get("answers", [])
        if isinstance(answers, str):
            answers = [answers]
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise EvaluationError(f"{where}: 'answers' must be a list of strings")
        answers = [a for a in answers if a.strip()]
        if item.get("unanswerable") and answers:
            raise EvaluationError(f"{where}: 'unanswerable' with answers")
        offset = item.get("offset")
        if offset is not None and (not isinstance(offset, int) or offset < 0):
            raise EvaluationError(f"{where}: 'offset' must be a character offset (a whole number >= 0)")
        qid = str(item.get("id", number))
        if qid in seen:
            raise EvaluationError(f"{where}: id {qid!r} used twice")
        seen.add(qid)
        questions.append(
            DocQuestion(
                id=qid,
                question=item["question"],
                answers=tuple(answers),
                file=item.get("file") or None,
                offset=offset,
                hard=bool(item.get("hard", False)),
            )
        )
    if not questions:
        raise EvaluationError(f"{source}: no questions")
    return questions


class DocumentFinder:
    """Finds the indexed document a question names: relative path, a tail of the path, or absolute."""

    def __init__(self, documents: Sequence[Document]) -> None:
        self._exact: dict[str, Document] = {}
        self._documents = list(documents)
        for document in documents:
            self._exact.setdefault(document.relative_path, document)
            self._exact[document.path] = document

    def find(self, file: str) -> Document | None:
        found = self._exact.get(file)
        if found is not None:
            return found
        tail = "/" + PurePosixPath(file).as_posix().lstrip("/")
        matches = [d for d in self._documents if d.path.endswith(tail)]
        return matches[0] if len(matches) == 1 else None


def _holds(passage: Passage, q: DocQuestion, document: Document | None) -> bool:
    """The passage (or a folded copy of it) is from the question's file and holds its answer."""
    places = [(passage.document_id, passage.char_start, passage.char_end, passage.text)]
    places += [(c.document_id, c.char_start, c.char_end, c.text) for c in passage.copies]
    for document_id, start, end, text in places:
        if document is not None and document_id != document.id:
            continue
        if q.offset is not None and document is not None:
            if start <= q.offset < end:
                return True
        elif contains_answer(text, list(q.answers)):
            return True
    return False


def _group_of(file: str | None) -> str:
    """A question's calibration group: the first folder of its file (a package, a manual), never split
    between fitting and measuring."""
    if not file:
        return ""
    parts = PurePosixPath(file).parts
    return parts[0] if len(parts) > 1 else file


def file_kind(document: Document | None, file: str | None) -> str:
    """What a question is scored under in the per-kind breakdown: the document's format."""
    if document is not None:
        return document.format
    if file:
        suffix = PurePosixPath(file).suffix.lower().lstrip(".")
        return suffix or "unknown"
    return "unknown"


def evaluate_docs(
    runtime: Runtime,
    questions: Sequence[DocQuestion],
    *,
    passages: int | None = None,
    source: str = "",
    on_progress: Callable[[int], None] | None = None,
) -> EvalReport:
    """Ask every question over the indexed documents and score the answers and the passages.

    Args:
        runtime: components on the data folder that holds the documents.
        questions: the questions (``read_doc_questions``).
        passages: passages the reader reads (default: the ``passages`` setting).
        source: the questions file, for the report.
        on_progress: called with the number of questions just finished.

    Returns:
        The metrics (overall, answerable, unanswerable, by file kind) and one record per question.
    """
    settings = runtime.settings
    n_passages = passages or settings.passages
    min_score = settings.min_score
    depth = max(max(RANKS), n_passages)
    finder = DocumentFinder(runtime.catalog.list_documents())
    if questions:  # load the models before anything is timed
        runtime.reader.warm_up()
        pipeline.ask(runtime, questions[0].question, AskOptions(passages=n_passages, answers=1))
    records: list[Record] = []
    seconds: list[float] = []
    for q in questions:
        document = finder.find(q.file) if q.file else None
        started = time.perf_counter()
        found = pipeline.search(runtime, q.question, SearchOptions(top_k=depth))
        result = pipeline.ask(
            runtime,
            q.question,
            AskOptions(passages=n_passages, answers=settings.answers, min_score=0.0),
            found=found,
        )
        seconds.append(time.perf_counter() - started)
        rank = None
        if q.answerable:
            rank = next((i for i, p in enumerate(found.passages, 1) if _holds(p, q, document)), None)
        candidates = [a for a in result.answers]
        shown = [a for a in candidates if a.score >= min_score]
        top = candidates[0] if candidates else None
        records.append(
            {
                "id": q.id,
                "question": q.question,
                "answers": list(q.answers),
                "answerable": q.answerable,
                "file": q.file,
                "file_found": document is not None,
                # "kind" and "article" as `eval squad` writes them, so `reader calibrate` reads both runs
                "kind": "answerable" if q.answerable else "unanswerable",
                "article": _group_of(q.file),
                "file_kind": file_kind(document, q.file),
                "hard": q.hard,
                "candidate": top.text if top else None,
                "candidate_path": top.path if top else None,
                "score": round(top.score, 4) if top else None,
                "right": bool(top and q.answerable and answer_matches(top.text, q.answers)),
                "features": top.features if top else None,
                "shown": [a.text for a in shown],
                "right_shown": q.answerable and any(answer_matches(a.text, q.answers) for a in shown),
                "declined": not shown,
                "passage_rank": rank,
            }
        )
        if on_progress:
            on_progress(1)
    missing = sorted({r["file"] for r in records if r["file"] and not r["file_found"]})
    metrics: dict[str, Any] = {
        "data": source,
        "questions": len(records),
        "passages_read": n_passages,
        "answers_shown": settings.answers,
        "min_score": min_score,
        "retriever_model": settings.retriever_model,
        "reader_model": settings.reader_model,
        WEIGHTS_KEY: runtime.reader_weights,
        "retrieval": settings.retrieval,
        "files_not_indexed": missing[:20],
        "files_not_indexed_count": len(missing),
        **summarize(records),
        "by_kind": {
            kind: summarize(group)
            for kind, group in sorted(_group(records, lambda r: r["file_kind"]).items())
        },
        "hard": summarize([r for r in records if r["hard"]]),
        "ask_latency": percentiles(seconds),
    }
    return EvalReport(metrics, records)


def _group(records: Sequence[Record], key: Callable[[Record], str]) -> dict[str, list[Record]]:
    groups: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        groups[key(record)].append(record)
    return groups


def _share(count: int, total: int) -> float | None:
    return round(100.0 * count / total, 2) if total else None


def _ece(scored: Sequence[Record]) -> float:
    return round(expected_calibration_error([r["score"] for r in scored], [r["right"] for r in scored]), 4)


def summarize(records: Sequence[Record]) -> dict[str, Any]:
    """The metrics of a group of question records (percentages; None where a group is empty).

    - ``top_right``: the best candidate is right, never abstaining (min_score 0);
    - ``top_right_shown``: right and shown at ``min_score``; ``right_among_shown``: any shown answer right;
    - ``passage_at_1/5/10``: a passage of the question's file holding the answer (at its offset where one
      is given) is among the first k passages retrieved;
    - ``declined``: no answer reaches ``min_score`` (answerable questions: lost; unanswerable: right);
    - ``ece``: the calibration error of the top candidates' scores, unanswerable questions counting as wrong;
      ``ece_floor``: what chance alone gives a perfectly calibrated score on as many answers.
    """
    answerable = [r for r in records if r["answerable"]]
    unanswerable = [r for r in records if not r["answerable"]]
    n = len(answerable)
    scored = [r for r in records if r["score"] is not None]
    result: dict[str, Any] = {
        "answerable": n,
        "unanswerable": len(unanswerable),
        "top_right": _share(sum(r["right"] for r in answerable), n),
        "top_right_shown": _share(sum(r["right"] and not r["declined"] for r in answerable), n),
        "right_among_shown": _share(sum(r["right_shown"] for r in answerable), n),
        "answerable_declined": _share(sum(r["declined"] for r in answerable), n),
        "unanswerable_declined": _share(sum(r["declined"] for r in unanswerable), len(unanswerable)),
        "ece": _ece(scored) if scored else None,
        "ece_floor": round(ece_noise_floor([r["score"] for r in scored]), 4) if scored else None,
    }
    for k in RANKS:
        result[f"passage_at_{k}"] = _share(
            sum(r["passage_rank"] is not None and r["passage_rank"] <= k for r in answerable), n
        )
    right = sum(r["right"] for r in answerable)
    result["right_kept"] = _share(sum(r["right"] and not r["declined"] for r in answerable), right)
    return result


def reliability_svg(records: Sequence[Record], title: str = "") -> str:
    """A reliability diagram of the top candidates' scores as a self-contained SVG (no plotting library)."""
    scored = [r for r in records if r["score"] is not None]
    rows = reliability([r["score"] for r in scored], [r["right"] for r in scored])
    size, pad = 320, 40
    total = max(len(scored), 1)

    def x(p: float) -> float:
        return pad + p * size

    def y(p: float) -> float:
        return pad + (1 - p) * size

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{size + 2 * pad}" height="{size + 2 * pad + 20}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect x="{pad}" y="{pad}" width="{size}" height="{size}" fill="white" stroke="#888"/>',
        f'<line x1="{x(0)}" y1="{y(0)}" x2="{x(1)}" y2="{y(1)}" stroke="#bbb" stroke-dasharray="4 3"/>',
    ]
    for low, high, count, mean_p, accuracy in rows:
        width = (high - low) * size - 2
        parts.append(
            f'<rect x="{x(low) + 1:.1f}" y="{y(accuracy):.1f}" width="{width:.1f}" '
            f'height="{accuracy * size:.1f}" fill="#4a7ebb" fill-opacity="{0.3 + 0.7 * count / total:.2f}">'
            f"<title>scores {low:.1f}-{high:.1f}: {count} answers, mean score {mean_p:.2f}, "
            f"right {accuracy:.2f}</title></rect>"
        )
        parts.append(f'<circle cx="{x(mean_p):.1f}" cy="{y(accuracy):.1f}" r="3" fill="#c33"/>')
    for tick in (0, 0.5, 1):
        parts.append(f'<text x="{x(tick) - 6:.1f}" y="{pad + size + 14}">{tick:g}</text>')
        parts.append(f'<text x="{pad - 22}" y="{y(tick) + 4:.1f}">{tick:g}</text>')
    ece = _ece(scored)
    parts.append(f'<text x="{pad}" y="{pad - 20}">{escape(title)}</text>')
    parts.append(
        f'<text x="{pad}" y="{pad - 6}">share right by score ({len(scored)} answers, ECE {ece:.3f})</text>'
    )
    parts.append(f'<text x="{pad + size / 2 - 30}" y="{pad + size + 30}">score</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
