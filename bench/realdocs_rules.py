"""The real-documents dev set and its scoring rules, shared by bench/realdocs.py and its Haystack peer.

Imports nothing of spanqa but ``reader.squad``'s answer rule, which needs only the standard library (the peer
runs in Haystack's own venv): the SQuAD answer normalization is passed in by the caller.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spanqa.reader.squad import answer_matches

DEFAULT_QUESTIONS = Path(__file__).resolve().parent / "realdocs" / "git-doc-questions.json"
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
    """The questions file's metadata (package, root, include/exclude globs) and its questions."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{path}: cannot read the questions ({exc})") from exc
    fields = set(Question.__dataclass_fields__)
    questions = [Question(**{k: v for k, v in q.items() if k in fields}) for q in data["questions"]]
    return data, questions


def glob_matches(relative_path: str, patterns: Sequence[str]) -> bool:
    """spanqa's include/exclude rule: the relative path or the file name matches a glob."""
    name = relative_path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(relative_path, p) or fnmatch.fnmatchcase(name, p) for p in patterns)


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


def score_question(
    q: Question,
    passages: Sequence[tuple[str, str]],
    predictions: Sequence[str],
    normalize: Callable[[str], str],
) -> tuple[dict[str, bool], int | None]:
    """Every metric of one question.

    Args:
        q: the question.
        passages: (page relative to the root, passage text) of the search results, best first.
        predictions: the answers' texts, best first ([] for an abstention).
        normalize: SQuAD's answer normalization.

    Returns:
        The metric -> hit mapping, and the rank of the first passage of the right page holding an answer.
    """
    documents: list[str] = []
    for page, _ in passages:
        if page not in documents:
            documents.append(page)
    chunk_rank = next(
        (
            rank
            for rank, (page, text) in enumerate(passages, 1)
            if page in q.pages and contains_answer(text, q.answers)
        ),
        None,
    )
    right = bool(predictions) and answer_matches(predictions[0], q.answers, normalize)
    outcome = {
        "page_top5": bool(q.pages & set(documents[:5])),
        "chunk_top1": chunk_rank is not None and chunk_rank <= 1,
        "chunk_top5": chunk_rank is not None and chunk_rank <= 5,
        "chunk_top10": chunk_rank is not None and chunk_rank <= 10,
        "answer_right": right,
        "answer_any": any(answer_matches(p, q.answers, normalize) for p in predictions),
    }
    return outcome, chunk_rank


def rate(hits: int, total: int) -> float:
    return round(100 * hits / total, 1) if total else float("nan")


def summarize_outcomes(questions: Sequence[Question], outcomes: Sequence[dict[str, bool]]) -> dict[str, Any]:
    """Each metric as a percentage, and answer_right / chunk_top5 by question kind and by identifier."""
    total = len(questions)
    result: dict[str, Any] = {name: rate(sum(o[name] for o in outcomes), total) for name in METRICS}
    groups: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for q, o in zip(questions, outcomes, strict=True):
        for group in (f"kind:{q.kind}", "identifier" if q.identifier else "not_identifier"):
            groups[group]["questions"] += 1
            groups[group]["answer_right"] += o["answer_right"]
            groups[group]["chunk_top5"] += o["chunk_top5"]
    result["breakdown"] = {
        group: {
            "questions": counts["questions"],
            "answer_right": rate(counts["answer_right"], counts["questions"]),
            "chunk_top5": rate(counts["chunk_top5"], counts["questions"]),
        }
        for group, counts in sorted(groups.items())
    }
    return result
