"""SQuAD-format data and the official v1.1 / v2.0 scoring (EM and F1).

Normalization follows the official evaluation script: lowercase, strip punctuation, drop the articles
a/an/the, collapse whitespace; the score of a prediction is its best over the gold answers.
"""

from __future__ import annotations

import collections
import json
import re
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from spanqa.errors import SpanqaError

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)
# Quote marks around a literal in documentation; not part of the answer.
_QUOTES = frozenset("\"'`‘’“”")


@dataclass(frozen=True)
class SquadAnswer:
    text: str
    start: int


@dataclass(frozen=True)
class SquadExample:
    """One question over one paragraph; ``answers`` is empty when the question is unanswerable."""

    id: str
    title: str
    context: str
    question: str
    answers: tuple[SquadAnswer, ...] = field(default_factory=tuple)
    is_impossible: bool = False
    article_index: int = 0
    paragraph_index: int = 0


class SquadFormatError(SpanqaError, ValueError):
    """The file is not SQuAD-format JSON."""


def load_squad(path: str | Path) -> list[SquadExample]:
    """Read a SQuAD v1.1 or v2.0 JSON file.

    Args:
        path: the file.

    Returns:
        One example per question, in file order.

    Raises:
        SquadFormatError: when the file is not SQuAD-format JSON.
    """
    try:
        with Path(path).open(encoding="utf-8") as fh:
            raw = json.load(fh)
        articles = raw["data"]
    except FileNotFoundError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SquadFormatError(f"{path}: not a SQuAD-format JSON file ({exc})") from exc
    examples: list[SquadExample] = []
    for a_index, article in enumerate(articles):
        title = str(article.get("title", ""))
        for p_index, paragraph in enumerate(article.get("paragraphs", [])):
            context = paragraph["context"]
            for qa in paragraph.get("qas", []):
                answers = tuple(
                    SquadAnswer(text=ans["text"], start=int(ans["answer_start"]))
                    for ans in qa.get("answers", [])
                )
                examples.append(
                    SquadExample(
                        id=str(qa["id"]),
                        title=title,
                        context=context,
                        question=qa["question"],
                        answers=answers,
                        is_impossible=bool(qa.get("is_impossible", False)) or not answers,
                        article_index=a_index,
                        paragraph_index=p_index,
                    )
                )
    return examples


def normalize_answer(text: str) -> str:
    """The official SQuAD normalization: lowercase, no punctuation, no articles, single spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def literal_answer(text: str) -> str:
    """An answer as written, for one that SQuAD's normalization erases (an option "-a", an operator "~",
    a separator "|"): single spaces, without the quote marks documentation puts around literals ("'-'",
    “*”). Case is kept: "-a" and "-A" are different options."""
    core = " ".join(text.split())
    while len(core) >= 2 and core[0] in _QUOTES and core[-1] in _QUOTES:
        core = core[1:-1].strip()
    return core


def answer_key(text: str) -> str:
    """What two answers are compared by: SQuAD's normalization, or the literal answer where that is empty
    (without it every answer of punctuation alone would be the same answer, and none could be scored)."""
    return normalize_answer(text) or literal_answer(text)


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str) -> float:
    return _token_f1(normalize_answer(prediction).split(), normalize_answer(gold).split())


def _token_f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    if not pred_tokens or not gold_tokens:
        # v2.0 rule: an empty answer scores 1 only against an empty gold answer.
        return float(pred_tokens == gold_tokens)
    common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def answer_matches(
    prediction: str, golds: Iterable[str], normalize: Callable[[str], str] = normalize_answer
) -> bool:
    """Whether an answer to a documentation question is right: after ``normalize``, equal to a gold answer,
    or one contains the other and the shorter has at least half the words of the longer ("--force-with-lease"
    matches "force-with-lease"; "hourly" does not match "on an hourly basis"). A gold answer that
    ``normalize`` erases (punctuation and articles only: "-a", "~") is compared as written instead
    (:func:`literal_answer`), by whole words: "-a, --all" matches "-a"; "-A" and "--all" do not."""
    got = normalize(prediction)
    literal = _literal_words(prediction)
    for answer in golds:
        gold = normalize(answer)
        if gold:
            if not got:
                continue
            if got == gold:
                return True
            shorter, longer = sorted((got, gold), key=len)
            if shorter in longer and 2 * len(shorter.split()) >= len(longer.split()):
                return True
        elif (words := _literal_words(answer)) and literal and _within(words, literal):
            return True
    return False


def _literal_words(text: str) -> list[str]:
    # A comma or semicolon ends a word in a list ("-a, --all"), unless it is the whole word.
    return [w.rstrip(",;") or w for w in literal_answer(text).split()]


def _within(gold: list[str], got: list[str]) -> bool:
    """Equal, or one a run of the other's words holding at least half of them."""
    shorter, longer = sorted((gold, got), key=len)
    if 2 * len(shorter) < len(longer):
        return False
    return any(longer[i : i + len(shorter)] == shorter for i in range(len(longer) - len(shorter) + 1))


def score_prediction(prediction: str, golds: Iterable[str]) -> tuple[float, float]:
    """EM and F1 of one prediction, each the best over the gold answers (empty gold list = unanswerable).

    A gold answer of punctuation alone ("-a", "~": documentation, never SQuAD dev) is compared as written
    (:func:`literal_answer`), word by word: SQuAD's normalization would erase it and score the question as
    unanswerable."""
    got = _literal_words(prediction)
    scores = []
    for gold in golds:
        if normalize_answer(gold):
            scores.append((exact_match(prediction, gold), f1_score(prediction, gold)))
        elif words := _literal_words(gold):
            scores.append((float(got == words), _token_f1(got, words)))
    if not scores:
        return exact_match(prediction, ""), f1_score(prediction, "")
    return max(em for em, _ in scores), max(f1 for _, f1 in scores)


def evaluate_predictions(
    examples: Iterable[SquadExample], predictions: Mapping[str, str]
) -> dict[str, float]:
    """SQuAD metrics over ``examples`` (percentages); HasAns/NoAns splits when unanswerable questions exist.

    Args:
        examples: the questions with their gold answers.
        predictions: question id -> predicted text ("" means the reader abstained).

    Returns:
        ``exact_match``, ``f1``, ``total``, and ``HasAns_*`` / ``NoAns_*`` when both kinds occur.
    """
    has_em: list[float] = []
    has_f1: list[float] = []
    no_em: list[float] = []
    for ex in examples:
        prediction = predictions.get(ex.id, "")
        em, f1 = score_prediction(prediction, [a.text for a in ex.answers])
        if ex.is_impossible:
            no_em.append(em)
        else:
            has_em.append(em)
            has_f1.append(f1)
    total = len(has_em) + len(no_em)
    if total == 0:
        return {"exact_match": 0.0, "f1": 0.0, "total": 0}
    metrics: dict[str, float] = {
        "exact_match": 100.0 * (sum(has_em) + sum(no_em)) / total,
        "f1": 100.0 * (sum(has_f1) + sum(no_em)) / total,
        "total": total,
    }
    if no_em:
        metrics.update(
            {
                "HasAns_total": len(has_em),
                "HasAns_exact": 100.0 * sum(has_em) / len(has_em) if has_em else 0.0,
                "HasAns_f1": 100.0 * sum(has_f1) / len(has_f1) if has_f1 else 0.0,
                "NoAns_total": len(no_em),
                "NoAns_exact": 100.0 * sum(no_em) / len(no_em),
            }
        )
    return metrics
