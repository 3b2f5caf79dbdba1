"""The answer's score as a probability of being right: features the pipeline already has, a logistic model.

A candidate answer is described by the reader's evidence (span score, margin over "no answer", how it
compares with the other candidates), the retriever's (cosine and BM25 score and rank of its passage before
fusion), how many passages agree on the same text, how many of the question's words its passage and its
sentence hold, and its length. A :class:`Calibrator` maps these to the probability that the answer is right;
it is fitted (scikit-learn's logistic regression on standardized features) on the open-setting SQuAD run of
``spanqa eval squad --unanswerable`` by ``spanqa reader calibrate`` and shipped as a small JSON file beside
the reader. Applying it needs only numpy-free arithmetic.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spanqa.errors import SpanqaError

#: The file beside a reader model that holds its calibrator.
CALIBRATION_FILE = "calibration.json"
# Where a calibrator records the digest of the reader weights it was fitted for (``weights_digest``).
WEIGHTS_KEY = "reader_weights"
CALIBRATION_VERSION = 1

#: Products of the reader's evidence: on documentation the chance of being right is not linear in it (with
#: them the out-of-fold ECE on techqa dev fell from 0.052 to 0.036, docs/benchmarks.md).
PRODUCT_FEATURES = (
    "span_x_margin",
    "margin_x_relative",
    "relative_x_retrieval",
    "margin_squared",
    "relative_squared",
)
#: The features read from the question and the answer's text alone (a run recorded without them gets them
#: from its questions and answers: ``answer_type_features``).
ANSWER_TYPE_FEATURES = (
    "quantity_number",
    "quantity_no_number",
    "answer_number",
    "answer_code",
    "asks_default",
    "option_given",
    "option_not_given",
    "answer_in_question",
    "answer_chars",
)
#: The features a calibrator reads, in order.
FEATURES = (
    "span_score",
    "margin",
    "relative_score",
    "retrieval",
    "passage_rank_inv",
    "dense_score",
    "dense_rank_inv",
    "lexical_score",
    "lexical_rank_inv",
    "agreement",
    "question_in_passage",
    "question_in_sentence",
    "answer_words",
    *PRODUCT_FEATURES,
    *ANSWER_TYPE_FEATURES,
)

_WORD = re.compile(r"\w+")
# A question that asks for a quantity: its answer should hold a number ("how many" answered with an
# adjective is a miss the reader makes on documentation).
_QUANTITY = re.compile(r"\bhow (many|much|long|large|big|far|often|old)\b|\bwhat (number|size|port)\b", re.I)
_DIGIT = re.compile(r"\d")
# A question that asks for a command-line option: its answer should be one ("-n", "--dry-run").
_OPTION = re.compile(r"\b(option|flag|switch)\b", re.I)
# Characters of an identifier, option, path or value rather than of prose.
_CODE = re.compile(r"[-_/=<>:]|\.\w")
# Words that say nothing about whether a passage is about the question.
_STOP_WORDS_TEXT = """
a an the of in on at to is was are were be been what which who whom whose when where why how did does do
for by with and or from that this these those as it its than then there their his her he she they
"""
_STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())


class CalibrationError(SpanqaError):
    """A calibration file that cannot be read, or data a calibrator cannot be fitted on."""


def content_words(text: str) -> set[str]:
    """The lowercased words of ``text`` without stop words."""
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP_WORDS}


def word_share(question_words: set[str], text: str) -> float:
    """The share of ``question_words`` that ``text`` holds (1.0 for a question of stop words only)."""
    if not question_words:
        return 1.0
    return len(question_words & content_words(text)) / len(question_words)


@dataclass(frozen=True)
class QuestionCues:
    """What the features need of a question, read once per question."""

    words: set[str]
    quantity: bool
    default: bool
    option: bool


def question_cues(question: str) -> QuestionCues:
    """The content words of ``question``, and whether it asks for a quantity, a default or an option."""
    return QuestionCues(
        content_words(question),
        bool(_QUANTITY.search(question)),
        "default" in question.lower(),
        bool(_OPTION.search(question)),
    )


def answer_type_features(cues: QuestionCues, answer: str) -> dict[str, float]:
    """Whether ``answer`` is of the kind the question asks for (a number for a quantity, an option for an
    option), what it looks like (a number; an identifier, option or path; its length), and how much of it
    the question already says (an answer that repeats the question's words is seldom what it asks)."""
    number = bool(_DIGIT.search(answer))
    option = answer.lstrip().startswith("-")
    words = content_words(answer)
    return {
        "quantity_number": float(cues.quantity and number),
        "quantity_no_number": float(cues.quantity and not number),
        "answer_number": float(number),
        "answer_code": float(bool(_CODE.search(answer))),
        "asks_default": float(cues.default),
        "option_given": float(cues.option and option),
        "option_not_given": float(cues.option and not option),
        "answer_in_question": len(words & cues.words) / len(words) if words else 0.0,
        "answer_chars": math.log1p(len(answer)),
    }


def _inverse_rank(rank: int | None) -> float:
    return 1.0 / rank if rank else 0.0


@dataclass(frozen=True)
class Candidate:
    """What the features of one candidate answer are computed from."""

    span_score: float
    margin: float
    relative_score: float
    retrieval: float
    passage_rank: int
    dense_score: float | None
    dense_rank: int | None
    lexical_score: float | None
    lexical_rank: int | None
    agreement: int
    passage_text: str
    sentence: str
    answer: str


def features(cues: QuestionCues, candidate: Candidate) -> dict[str, float]:
    """The calibrator's features of ``candidate`` for a question with these cues, by name (see
    ``FEATURES``)."""
    question_words = cues.words
    evidence = {
        "span_score": candidate.span_score,
        "margin": candidate.margin,
        "relative_score": candidate.relative_score,
        "retrieval": candidate.retrieval,
        "passage_rank_inv": _inverse_rank(candidate.passage_rank),
        "dense_score": candidate.dense_score or 0.0,
        "dense_rank_inv": _inverse_rank(candidate.dense_rank),
        "lexical_score": math.log1p(max(candidate.lexical_score or 0.0, 0.0)),
        "lexical_rank_inv": _inverse_rank(candidate.lexical_rank),
        "agreement": math.log1p(candidate.agreement),
        "question_in_passage": word_share(question_words, candidate.passage_text),
        "question_in_sentence": word_share(question_words, candidate.sentence),
        "answer_words": math.log1p(len(_WORD.findall(candidate.answer))),
    }
    return {**evidence, **evidence_products(evidence), **answer_type_features(cues, candidate.answer)}


def evidence_products(values: Mapping[str, float]) -> dict[str, float]:
    """The products of the reader's and the retriever's evidence that the calibrator reads
    (``PRODUCT_FEATURES``), from the span score, margin, relative score and retrieval among ``values`` (a
    run recorded before them gets them from its features; a missing one counts 0)."""
    span_score, margin, relative, retrieval = (
        float(values.get(name, 0.0)) for name in ("span_score", "margin", "relative_score", "retrieval")
    )
    return {
        "span_x_margin": span_score * margin,
        "margin_x_relative": margin * relative,
        "relative_x_retrieval": relative * retrieval,
        "margin_squared": margin * margin,
        "relative_squared": relative * relative,
    }


@dataclass(frozen=True)
class Calibrator:
    """A logistic model over standardized features: ``p = 1 / (1 + exp(-(b + sum(w * (x - mean) / scale))))``.

    Attributes:
        features: the feature names, in the order of the other lists.
        mean, scale: per feature, what it is standardized with.
        coef, intercept: the logistic model.
        info: how it was fitted (data, questions, cross-validated ECE, ...).
    """

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    info: dict[str, Any] = field(default_factory=dict)

    def probability(self, values: Mapping[str, float]) -> float:
        """The probability that the answer with these feature values is right."""
        z = self.intercept
        for name, mean, scale, weight in zip(self.features, self.mean, self.scale, self.coef, strict=True):
            z += weight * (float(values.get(name, 0.0)) - mean) / scale
        if z >= 0:
            return 1.0 / (1.0 + math.exp(-z))
        e = math.exp(z)
        return e / (1.0 + e)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": CALIBRATION_VERSION,
            "features": list(self.features),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "coef": list(self.coef),
            "intercept": self.intercept,
            "info": self.info,
        }

    def save(self, path: str | Path) -> Path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        return target

    @classmethod
    def load(cls, path: str | Path) -> Calibrator:
        """Read a calibrator written by :meth:`save`.

        Raises:
            CalibrationError: the file is unreadable or not a calibrator of this version.
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            if data.get("version") != CALIBRATION_VERSION:
                raise ValueError(f"version {data.get('version')!r}, expected {CALIBRATION_VERSION}")
            calibrator = cls(
                features=tuple(data["features"]),
                mean=tuple(float(v) for v in data["mean"]),
                scale=tuple(float(v) or 1.0 for v in data["scale"]),
                coef=tuple(float(v) for v in data["coef"]),
                intercept=float(data["intercept"]),
                info=dict(data.get("info") or {}),
            )
            lengths = {len(calibrator.mean), len(calibrator.scale), len(calibrator.coef)}
            if lengths != {len(calibrator.features)}:
                raise ValueError("feature lists of different lengths")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CalibrationError(f"cannot read calibration file {path}: {exc}") from exc
        return calibrator


def settings_mismatch(
    calibrator: Calibrator, current: Mapping[str, Any], weights: str | None = None
) -> list[str]:
    """The settings that shape a score and differ from those the calibrator was fitted with, as
    ``name (fitted with X, now Y)``; [] for a calibrator that recorded none.

    Args:
        calibrator: the calibrator.
        current: the score settings in force (``Settings.score_settings()``).
        weights: the reader's ``weights_digest`` now (None: unknown, not compared).
    """
    fitted = calibrator.info.get("settings") or {}
    changed = [
        f"{name} (fitted with {fitted[name]!r}, now {current[name]!r})"
        for name in sorted(fitted)
        if name in current and fitted[name] != current[name]
    ]
    fitted_weights = calibrator.info.get(WEIGHTS_KEY)
    if fitted_weights and weights and fitted_weights != weights:
        # The same reader name can hold retrained or averaged weights that read differently.
        changed.append(f"the reader's weights (fitted with {fitted_weights}, now {weights})")
    return changed


def weights_digest(model_location: str | Path) -> str | None:
    """The first 16 hex digits of the sha256 of a local reader's weight files (``*.safetensors``,
    ``*.bin``), or None for a hub name or a folder without them. A calibrator records it when fitted.
    """
    folder = Path(model_location)
    files = sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")) if folder.is_dir() else []
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def calibrator_for(model_location: str | Path) -> Calibrator | None:
    """The calibrator shipped beside a local reader model, or None (a hub model, or none fitted)."""
    path = Path(model_location) / CALIBRATION_FILE
    return Calibrator.load(path) if path.is_file() else None


def expected_calibration_error(
    probabilities: Sequence[float], labels: Sequence[bool], bins: int = 10
) -> float:
    """ECE: over equal-width probability bins, the gap between mean probability and accuracy, weighted by
    the bin's share of the answers."""
    if not probabilities:
        return 0.0
    total = 0.0
    for low, high, count, mean_p, accuracy in reliability(probabilities, labels, bins):
        del low, high
        total += count * abs(mean_p - accuracy)
    return total / len(probabilities)


def ece_noise_floor(probabilities: Sequence[float], draws: int = 100, seed: int = 0) -> float:
    """The ECE a perfectly calibrated score shows on answers with these scores, by chance alone: the mean ECE
    over ``draws`` label sets, each answer right with its own probability. An ECE near it says nothing
    about miscalibration at this sample size."""
    if not probabilities:
        return 0.0
    rng = random.Random(seed)
    total = 0.0
    for _ in range(draws):
        total += expected_calibration_error(probabilities, [rng.random() < p for p in probabilities])
    return total / draws


def reliability(
    probabilities: Sequence[float], labels: Sequence[bool], bins: int = 10
) -> list[tuple[float, float, int, float, float]]:
    """Per non-empty bin: (low, high, answers, mean probability, share right) - a reliability diagram."""
    rows = []
    for index in range(bins):
        low, high = index / bins, (index + 1) / bins
        members = [
            (p, y)
            for p, y in zip(probabilities, labels, strict=True)
            if low <= p < high or (index == bins - 1 and p == 1.0)
        ]
        if members:
            mean_p = sum(p for p, _ in members) / len(members)
            accuracy = sum(1.0 for _, y in members if y) / len(members)
            rows.append((low, high, len(members), mean_p, accuracy))
    return rows


def fit_calibrator(
    rows: Sequence[Mapping[str, float]],
    labels: Sequence[bool],
    groups: Sequence[str],
    *,
    folds: int = 5,
    weights: Sequence[float] | None = None,
    info: dict[str, Any] | None = None,
) -> tuple[Calibrator, dict[str, Any]]:
    """Fit a calibrator, and measure it by cross-validation with whole groups (articles) held out.

    Args:
        rows: per candidate answer, its features by name.
        labels: whether each is right.
        groups: per candidate, its article: a fold never splits an article between fit and measure.
        folds: cross-validation folds (at most the number of groups).
        weights: per candidate, how much it counts in the fit (default 1 each); the metrics count each once.
        info: what to record about the data in the calibrator.

    Returns:
        The calibrator fitted on all rows, and metrics: cross-validated ECE, its reliability table, the
        out-of-fold probabilities (for threshold curves), and the ECE of the raw relative score.

    Raises:
        CalibrationError: too little data, or only one class.
    """
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold
    from sklearn.preprocessing import StandardScaler

    y = np.array([bool(v) for v in labels])
    if len(y) < 20 or y.all() or not y.any():
        raise CalibrationError("calibration needs at least 20 answers, some right and some wrong")
    x = np.array([[float(row.get(name, 0.0)) for name in FEATURES] for row in rows])
    group_array = np.array(list(groups))
    weight = np.ones(len(y)) if weights is None else np.array([float(w) for w in weights])
    n_folds = min(folds, len(set(groups)))
    if n_folds < 2:
        raise CalibrationError("calibration needs answers from at least two articles")

    def model() -> tuple[StandardScaler, LogisticRegression]:
        return StandardScaler(), LogisticRegression(C=1.0, max_iter=1000)

    out_of_fold = np.zeros(len(y))
    for train, test in GroupKFold(n_splits=n_folds).split(x, y, group_array):
        scaler, logistic = model()
        logistic.fit(scaler.fit_transform(x[train]), y[train], sample_weight=weight[train])
        out_of_fold[test] = logistic.predict_proba(scaler.transform(x[test]))[:, 1]
    scaler, logistic = model()
    logistic.fit(scaler.fit_transform(x), y, sample_weight=weight)
    probabilities = [float(p) for p in out_of_fold]
    raw = [float(row.get("relative_score", 0.0)) for row in rows]
    label_list = [bool(v) for v in y]
    ece_cv = expected_calibration_error(probabilities, label_list)
    metrics: dict[str, Any] = {
        "answers": len(label_list),
        "right": int(y.sum()),
        "folds": n_folds,
        "ece_cv": ece_cv,
        "ece_relative_score": expected_calibration_error(raw, label_list),
        "reliability_cv": reliability(probabilities, label_list),
        "probabilities_cv": probabilities,
    }
    calibrator = Calibrator(
        features=FEATURES,
        mean=tuple(float(v) for v in scaler.mean_),
        scale=tuple(float(v) or 1.0 for v in scaler.scale_),
        coef=tuple(float(v) for v in logistic.coef_[0]),
        intercept=float(logistic.intercept_[0]),
        info={**(info or {}), "answers": len(label_list), "ece_cv": round(ece_cv, 4)},
    )
    return calibrator, metrics
