from __future__ import annotations

import json
from pathlib import Path

import pytest

from spanqa.reader.squad import (
    SquadFormatError,
    evaluate_predictions,
    exact_match,
    f1_score,
    load_squad,
    normalize_answer,
    score_prediction,
)


def test_normalization_matches_the_official_script() -> None:
    assert normalize_answer("The  Denver Broncos!") == "denver broncos"
    assert normalize_answer("an apple, a pear") == "apple pear"
    assert normalize_answer("Theatre") == "theatre"  # "the" only as a whole word


@pytest.mark.parametrize(
    ("prediction", "gold", "em", "f1"),
    [
        ("Denver Broncos", "Denver Broncos", 1.0, 1.0),
        ("the Denver Broncos", "Denver Broncos", 1.0, 1.0),
        ("Broncos", "Denver Broncos", 0.0, 2 * (1.0 * 0.5) / 1.5),
        ("Denver Broncos team", "Denver Broncos", 0.0, 2 * (2 / 3 * 1.0) / (2 / 3 + 1.0)),
        ("Carolina", "Denver Broncos", 0.0, 0.0),
        # "a" is an article: "b" against "b b" overlaps once, precision 1, recall 0.5.
        ("a b a", "a b b", 0.0, 2 * 1.0 * 0.5 / 1.5),
    ],
)
def test_em_and_f1_hand_worked(prediction: str, gold: str, em: float, f1: float) -> None:
    assert exact_match(prediction, gold) == em
    assert f1_score(prediction, gold) == pytest.approx(f1)


def test_best_over_gold_answers() -> None:
    em, f1 = score_prediction("Santa Clara", ["Levi's Stadium", "Santa Clara, California", "Santa Clara"])
    assert em == 1.0 and f1 == 1.0


def test_answers_of_punctuation_alone_are_scored_as_written() -> None:
    # Normalized as SQuAD answers, "-a" is "": the question would be scored as unanswerable.
    assert score_prediction("-a", ["-a"]) == (1.0, 1.0) and score_prediction("'-a'", ["-a"]) == (1.0, 1.0)
    assert score_prediction("", ["-a"]) == (0.0, 0.0) and score_prediction("-A", ["-a"]) == (0.0, 0.0)
    em, f1 = score_prediction("-a, --all", ["a tilde", "-a"])
    assert em == 0.0 and f1 == pytest.approx(2 / 3)
    assert score_prediction("", []) == (1.0, 1.0)  # unanswerable, abstained


def test_v2_metrics_split_has_and_no_answer(tmp_path: Path) -> None:
    data = {
        "version": "v2.0",
        "data": [
            {
                "title": "T",
                "paragraphs": [
                    {
                        "context": "Denver won the game in Santa Clara.",
                        "qas": [
                            {
                                "id": "q1",
                                "question": "Who won?",
                                "answers": [{"text": "Denver", "answer_start": 0}],
                            },
                            {"id": "q2", "question": "Who lost?", "answers": [], "is_impossible": True},
                            {
                                "id": "q3",
                                "question": "Where?",
                                "answers": [{"text": "Santa Clara", "answer_start": 23}],
                            },
                        ],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(data))
    examples = load_squad(path)
    assert [e.is_impossible for e in examples] == [False, True, False]
    metrics = evaluate_predictions(examples, {"q1": "Denver", "q2": "", "q3": "Clara"})
    assert metrics["HasAns_total"] == 2 and metrics["NoAns_total"] == 1
    assert metrics["HasAns_exact"] == pytest.approx(50.0)
    assert metrics["NoAns_exact"] == pytest.approx(100.0)
    assert metrics["exact_match"] == pytest.approx(200 / 3)
    assert metrics["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1) / 3)
    # Answering an unanswerable question scores 0 for it.
    assert (
        evaluate_predictions(examples, {"q1": "Denver", "q2": "Denver", "q3": "Santa Clara"})["NoAns_exact"]
        == 0
    )


def test_not_squad_json_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(SquadFormatError):
        load_squad(path)
