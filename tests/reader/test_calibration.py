"""The score calibrator: hand-made models and features, ECE by hand, fitting on synthetic data, the
answers it gives and hides."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from spanqa.reader.answers import AnswerBuilder
from spanqa.reader.calibration import (
    ANSWER_TYPE_FEATURES,
    FEATURES,
    PRODUCT_FEATURES,
    CalibrationError,
    Calibrator,
    answer_type_features,
    calibrator_for,
    content_words,
    ece_noise_floor,
    evidence_products,
    expected_calibration_error,
    fit_calibrator,
    question_cues,
    reliability,
    settings_mismatch,
    weights_digest,
    word_share,
)
from spanqa.reader.decoding import SpanCandidate
from spanqa.reader.reader import ReaderResult
from spanqa.types import Passage


def margin_only(weight: float = 1.0, intercept: float = 0.0) -> Calibrator:
    coef = tuple(weight if name == "margin" else 0.0 for name in FEATURES)
    zeros, ones = (0.0,) * len(FEATURES), (1.0,) * len(FEATURES)
    return Calibrator(FEATURES, zeros, ones, coef, intercept)


def test_probability_is_the_logistic_of_the_standardized_features() -> None:
    calibrator = Calibrator(("margin", "agreement"), (1.0, 0.0), (2.0, 1.0), (4.0, -1.0), 0.5)
    # z = 0.5 + 4 * (3 - 1) / 2 - 1 * (1 - 0) / 1 = 3.5
    assert calibrator.probability({"margin": 3.0, "agreement": 1.0}) == pytest.approx(
        1 / (1 + 2.718281828**-3.5)
    )
    assert calibrator.probability({"margin": -1e6, "agreement": 0.0}) == pytest.approx(0.0)  # no overflow
    assert calibrator.probability({"margin": 1e6, "agreement": 0.0}) == pytest.approx(1.0)
    low, high = (margin_only().probability({"margin": m}) for m in (-2.0, 2.0))
    assert 0 < low < 0.5 < high < 1


def test_a_calibrator_survives_a_file_and_a_bad_file_is_one_line(tmp_path: Path) -> None:
    calibrator = margin_only(2.0, -1.0)
    path = calibrator.save(tmp_path / "calibration.json")
    assert Calibrator.load(path) == calibrator
    assert calibrator_for(tmp_path) == calibrator and calibrator_for(tmp_path / "elsewhere") is None
    path.write_text(json.dumps({**calibrator.to_dict(), "coef": [1.0]}))
    with pytest.raises(CalibrationError) as caught:
        Calibrator.load(path)
    assert "\n" not in str(caught.value)
    path.write_text("{not json")
    with pytest.raises(CalibrationError):
        Calibrator.load(path)


def test_the_weights_digest_follows_the_bytes_and_a_calibrator_compares_it(tmp_path: Path) -> None:
    model = tmp_path / "reader"
    model.mkdir()
    assert weights_digest(model) is None and weights_digest("someone/hub-reader") is None
    (model / "model.safetensors").write_bytes(b"weights one")
    (model / "config.json").write_text("{}")
    first = weights_digest(model)
    assert first is not None and len(first) == 16
    (model / "config.json").write_text('{"changed": true}')  # not a weight
    assert weights_digest(model) == first
    (model / "model.safetensors").write_bytes(b"weights two")
    second = weights_digest(model)
    assert second not in (None, first)
    settings = {"passages": 10}
    info = {"settings": settings, "reader_weights": first}
    fitted = Calibrator(("margin",), (0.0,), (1.0,), (1.0,), 0.0, info=info)
    assert settings_mismatch(fitted, settings, first) == []
    assert settings_mismatch(fitted, settings, None) == []  # unknown now: nothing to compare
    [changed] = settings_mismatch(fitted, settings, second)
    assert first in changed and second in changed and "weights" in changed
    # A calibrator fitted before weights were recorded says nothing of them.
    older = Calibrator(("margin",), (0.0,), (1.0,), (1.0,), 0.0, info={"settings": settings})
    assert settings_mismatch(older, settings, second) == []


def test_expected_calibration_error_by_hand() -> None:
    assert expected_calibration_error([0.25, 0.25, 0.25, 0.25], [True, False, False, False]) == 0.0
    assert expected_calibration_error([1.0, 1.0], [True, False]) == pytest.approx(0.5)
    # Two bins: 0.9 said, 1/2 right (gap 0.4); 0.1 said, 0/2 right (gap 0.1): (2 * 0.4 + 2 * 0.1) / 4
    ece = expected_calibration_error([0.9, 0.9, 0.1, 0.1], [True, False, False, False])
    assert ece == pytest.approx(0.25)
    assert [row[2] for row in reliability([0.9, 0.9, 0.1, 0.1], [True, False, False, False])] == [2, 2]


def test_answer_type_features_say_whether_the_answer_is_what_the_question_asks_for() -> None:
    quantity = question_cues("How many entries can the queue hold at most?")
    assert quantity.quantity and not quantity.default and "queue" in quantity.words
    assert answer_type_features(quantity, "16384")["quantity_number"] == 1.0
    adjective = answer_type_features(quantity, "large")
    assert adjective["quantity_no_number"] == 1.0 and adjective["quantity_number"] == 0.0
    default = question_cues("Which http-reuse strategy is the default?")
    assert default.default and not default.quantity
    assert answer_type_features(default, "safe") == dict.fromkeys(ANSWER_TYPE_FEATURES, 0.0) | {
        "asks_default": 1.0,
        "answer_chars": math.log1p(len("safe")),
    }
    for code in ("--dry-run", "/etc/ssh/sshd_config", "max_connections=100", "os.path"):
        assert answer_type_features(default, code)["answer_code"] == 1.0, code
    assert answer_type_features(default, "Mr. Smith")["answer_code"] == 0.0
    assert set(ANSWER_TYPE_FEATURES) <= set(FEATURES)


def test_an_option_question_wants_an_option_and_not_its_own_words() -> None:
    option = question_cues("Which option makes grep tally the matching lines?")
    assert option.option and not question_cues("What does grep count?").option
    assert answer_type_features(option, "-c")["option_given"] == 1.0
    prose = answer_type_features(option, "matching lines")
    assert prose["option_not_given"] == 1.0 and prose["option_given"] == 0.0
    # Both of the answer's words are in the question; none of "--count"'s.
    assert prose["answer_in_question"] == 1.0
    assert answer_type_features(option, "--count")["answer_in_question"] == 0.0
    assert answer_type_features(option, "")["answer_in_question"] == 0.0


def test_the_products_of_the_evidence_are_features_by_name() -> None:
    products = evidence_products({"span_score": 2.0, "margin": 3.0, "relative_score": 0.5, "retrieval": 0.25})
    assert tuple(products) == PRODUCT_FEATURES and set(PRODUCT_FEATURES) <= set(FEATURES)
    assert products == {
        "span_x_margin": 6.0,
        "margin_x_relative": 1.5,
        "relative_x_retrieval": 0.125,
        "margin_squared": 9.0,
        "relative_squared": 0.25,
    }


def test_the_noise_floor_is_what_chance_gives_a_calibrated_score() -> None:
    scores = [0.2, 0.5, 0.7, 0.9] * 50
    floor = ece_noise_floor(scores)
    assert 0.0 < floor < 0.15 and floor == ece_noise_floor(scores)  # a fixed seed: the same number again
    assert ece_noise_floor(scores * 16) < floor  # more answers, less noise
    assert ece_noise_floor([0.0, 1.0, 1.0]) == 0.0 and ece_noise_floor([]) == 0.0


def test_question_words_ignore_stop_words() -> None:
    assert content_words("What is the capital of Poland?") == {"capital", "poland"}
    assert word_share({"capital", "poland"}, "Warsaw is the capital.") == 0.5
    assert word_share(set(), "anything") == 1.0


def test_fitting_finds_the_evidence_and_is_calibrated_out_of_fold() -> None:
    rng = random.Random(7)
    rows, labels, groups = [], [], []
    for i in range(1200):
        margin = rng.uniform(-4, 6)
        right = rng.random() < 1 / (1 + 2.718281828 ** -(margin - 1))
        rows.append({name: rng.gauss(0, 1) for name in FEATURES} | {"margin": margin})
        labels.append(right)
        groups.append(f"article-{i % 12}")
    calibrator, metrics = fit_calibrator(rows, labels, groups, info={"data": "synthetic"})
    weights = dict(zip(calibrator.features, calibrator.coef, strict=True))
    assert weights["margin"] > 0 and all(
        abs(w) < abs(weights["margin"]) for n, w in weights.items() if n != "margin"
    )
    assert metrics["folds"] == 5 and metrics["answers"] == 1200 and len(metrics["probabilities_cv"]) == 1200
    assert metrics["ece_cv"] < 0.06
    assert calibrator.info["data"] == "synthetic"
    # Weighing the answers of some articles down moves the fit toward the others.
    heavy, light = [1.0 if g != "article-0" else 0.1 for g in groups], [1.0] * len(groups)
    weighted, _ = fit_calibrator(rows, labels, groups, weights=heavy)
    assert weighted.coef != fit_calibrator(rows, labels, groups, weights=light)[0].coef
    with pytest.raises(CalibrationError):
        fit_calibrator(rows[:30], [True] * 30, groups[:30])
    with pytest.raises(CalibrationError):
        fit_calibrator(rows, labels, ["one article"] * len(rows))


def _passage(text: str) -> Passage:
    return Passage("c1", "d1", "d1.txt", text, 0, len(text), 0.8, dense_score=0.6, dense_rank=1)


def test_answers_carry_the_calibrated_score_and_hide_below_min_score() -> None:
    text = "The Denver Broncos won Super Bowl 50 in Santa Clara."
    broncos, clara = text.index("Denver Broncos"), text.index("Santa Clara")
    result = ReaderResult(
        spans=[
            SpanCandidate(0, broncos, broncos + 14, 9.0, 1.0, 0, 0),  # margin 8
            SpanCandidate(0, clara, clara + 11, 3.0, 1.0, 0, 0),  # margin 2
        ],
        null_score=1.0,
    )
    calibrator = margin_only(1.0, -4.0)  # p = sigmoid(margin - 4)
    builder = AnswerBuilder(retriever_weight=0.5, no_answer_threshold=0.0, answers=3, calibrator=calibrator)
    answers = builder.run(result, [_passage(text)], question="Who won Super Bowl 50?")
    assert [a.text for a in answers] == ["Denver Broncos", "Santa Clara"]
    for answer in answers:
        assert set(answer.features) == set(FEATURES)
        assert answer.score == pytest.approx(calibrator.probability(answer.features))
        assert answer.score != answer.relative_score
    assert answers[0].features["question_in_sentence"] == 1.0  # super, bowl, 50, won: all in the sentence
    strict = AnswerBuilder(
        retriever_weight=0.5, no_answer_threshold=0.0, answers=3, calibrator=calibrator, min_score=0.5
    )
    assert [a.text for a in strict.run(result, [_passage(text)], question="Who won?")] == ["Denver Broncos"]
    # Without a calibrator the score is the relative score.
    plain = AnswerBuilder(retriever_weight=0.5, no_answer_threshold=0.0, answers=3).run(
        result, [_passage(text)]
    )
    assert all(a.score == a.relative_score for a in plain)


def test_answers_are_ordered_by_probability_and_a_hidden_one_gives_way() -> None:
    text = "The Denver Broncos won Super Bowl 50 in Santa Clara."
    broncos, clara = text.index("Denver Broncos"), text.index("Santa Clara")
    result = ReaderResult(
        spans=[
            SpanCandidate(0, clara, clara + 11, 9.0, 8.5, 0, 0),  # the higher span score, margin 0.5
            SpanCandidate(0, broncos, broncos + 14, 8.0, 0.0, 0, 0),  # margin 8
        ],
        null_score=0.0,
    )
    calibrator = margin_only(1.0, -4.0)
    one = AnswerBuilder(retriever_weight=0.0, no_answer_threshold=0.0, answers=1, calibrator=calibrator)
    assert [a.text for a in one.run(result, [_passage(text)])] == ["Denver Broncos"]
    both = AnswerBuilder(retriever_weight=0.0, no_answer_threshold=0.0, answers=2, calibrator=calibrator)
    scores = [a.score for a in both.run(result, [_passage(text)])]
    assert scores == sorted(scores, reverse=True) and len(scores) == 2
