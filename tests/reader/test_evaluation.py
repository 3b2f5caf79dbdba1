from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from spanqa.cli import main
from spanqa.reader.evaluation import _best_threshold, threshold_table
from spanqa.reader.squad import SquadAnswer, SquadExample

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "squad-mini.json"


def _example(qid: str, answer: str | None) -> SquadExample:
    answers = (SquadAnswer(text=answer, start=0),) if answer else ()
    return SquadExample(
        id=qid, title="t", context="c", question="q", answers=answers, is_impossible=answer is None
    )


EXAMPLES = [_example("a", "Denver Broncos"), _example("b", "1990"), _example("c", None), _example("d", None)]
BEST_TEXTS = {"a": "the Denver Broncos", "b": "in 1991", "c": "Paris", "d": ""}
MARGINS = {"a": 6.0, "b": 1.0, "c": 2.0, "d": float("-inf")}


def test_threshold_table_by_hand() -> None:
    never, zero, three = threshold_table(EXAMPLES, BEST_TEXTS, MARGINS, [None, 0.0, 3.0])
    # never: a right (EM 1), b wrong, c answers an unanswerable question (0), d has no span (abstains: 1).
    assert never["threshold"] is None
    assert never["exact_match"] == pytest.approx(50.0)
    assert never["answered"] == pytest.approx(75.0)
    assert never["NoAns_exact"] == pytest.approx(50.0)
    # "in 1991" vs "1990": no token in common.
    assert never["HasAns_f1"] == pytest.approx(50.0)
    assert zero == {**never, "threshold": 0.0}
    # 3: b (margin 1) and c (margin 2) abstain too: c becomes right, b stays wrong.
    assert three["exact_match"] == pytest.approx(75.0)
    assert three["NoAns_exact"] == pytest.approx(100.0)
    assert three["answered"] == pytest.approx(25.0)


def test_threshold_table_agrees_with_the_best_threshold_sweep() -> None:
    best = _best_threshold(EXAMPLES, BEST_TEXTS, MARGINS)
    (row,) = threshold_table(EXAMPLES, BEST_TEXTS, MARGINS, [best["best_threshold"]])
    assert row["f1"] == pytest.approx(best["best_f1"])
    assert row["exact_match"] == pytest.approx(best["best_exact"])


def test_cli_reader_eval_tabulates_thresholds_from_one_pass(tiny_qa_bert_dir: Path) -> None:
    env = {"SPANQA_READER_BACKEND": "torch", "SPANQA_CONFIG": ""}
    args = ["reader", "eval", "--data", str(FIXTURE), "--model", str(tiny_qa_bert_dir), "--limit", "8"]
    result = CliRunner().invoke(main, [*args, "--thresholds", "none,-1e9,0,1e9", "--json"], env=env)
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    table = metrics["threshold_table"]
    assert [row["threshold"] for row in table] == [None, -1e9, 0.0, 1e9]
    # v1.1 without --threshold never abstains: the "never" row is the headline result.
    assert table[0]["f1"] == pytest.approx(metrics["f1"])
    assert table[0]["answered"] == table[1]["answered"] == pytest.approx(100.0)
    assert table[3]["answered"] == pytest.approx(0.0)
    answered = [row["answered"] for row in table]
    assert answered == sorted(answered, reverse=True)

    text = CliRunner().invoke(main, [*args, "--thresholds", "none,0"], env=env)
    assert text.exit_code == 0, text.output
    assert "never" in text.output and "answered" in text.output


def test_cli_reader_eval_rejects_a_bad_threshold_list(tiny_qa_bert_dir: Path) -> None:
    result = CliRunner().invoke(
        main, ["reader", "eval", "--data", str(FIXTURE), "--thresholds", "0,high"], env={"SPANQA_CONFIG": ""}
    )
    assert result.exit_code == 2
    assert "'high' is not a number" in result.output
    assert "Traceback" not in result.output
