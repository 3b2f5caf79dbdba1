from __future__ import annotations

import json
import random
from pathlib import Path

from click.testing import CliRunner

from spanqa.cli import main
from spanqa.evaluation import contains_answer, recall_at
from spanqa.reader.calibration import FEATURES
from spanqa.settings import Settings

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "squad-tiny-open.json"


def eval_env(settings: Settings) -> dict[str, str]:
    """The tiny test models and small chunks, for `spanqa eval squad` on the fixtures."""
    return {
        "SPANQA_RETRIEVER_MODEL": settings.retriever_model,
        "SPANQA_READER_MODEL": settings.reader_model,
        "SPANQA_CHUNK_TOKENS": "48",
        "SPANQA_CHUNK_OVERLAP": "12",
        "SPANQA_MODEL_CACHE_DIR": str(settings.model_cache),
        "SPANQA_CONFIG": "",
    }


def test_contains_answer_uses_squad_normalization_on_word_boundaries() -> None:
    assert contains_answer("The Denver Broncos won.", ["denver broncos"])
    assert contains_answer("won by the Broncos!", ["The Broncos"])
    assert not contains_answer("Broncosville", ["Broncos"])
    assert not contains_answer("anything", [])


def test_recall_at_k_by_hand() -> None:
    hits = [False, False, True] + [False] * 17
    assert recall_at(hits) == {1: False, 5: True, 10: True, 20: True}
    assert recall_at([False] * 20) == {1: False, 5: False, 10: False, 20: False}
    assert recall_at([True]) == {1: True, 5: True, 10: True, 20: True}


def test_eval_squad_end_to_end_writes_a_well_formed_report(settings: Settings, tmp_path: Path) -> None:
    env = eval_env(settings)
    out = tmp_path / "eval"
    result = CliRunner().invoke(
        main, ["eval", "squad", str(FIXTURE), "--out", str(out), "--passages", "3", "--json"], env=env
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    assert metrics == json.loads((out / "report.json").read_text())
    assert metrics["questions"] == 5 and metrics["articles"] == 2 and metrics["chunks"] > 0
    recalls = [metrics["recall"][f"@{k}"] for k in (1, 5, 10, 20)]
    assert recalls == sorted(recalls) and all(0 <= r <= 100 for r in recalls)
    for block in ("reader_only", "end_to_end", "end_to_end_never_abstain"):
        assert 0 <= metrics[block]["exact_match"] <= metrics[block]["f1"] <= 100
    # An abstention is never right, so answering every question can only score as high or higher.
    assert metrics["end_to_end_never_abstain"]["f1"] >= metrics["end_to_end"]["f1"]
    assert set(metrics["latency"]) == {"encode", "search", "read", "total"}
    assert 0 <= metrics["abstention_rate"] <= 100 and metrics["ingest"]["failed"] == 0
    lines = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    assert len(lines) == 5
    for record in lines:
        assert set(record) >= {"id", "question", "gold", "prediction", "abstained", "first_hit_rank"}
        assert record["abstained"] == (record["prediction"] == "")
    # The same --out twice would mix two indexes: refused in one line.
    again = CliRunner().invoke(main, ["eval", "squad", str(FIXTURE), "--out", str(out)], env=env)
    assert again.exit_code == 2 and "not empty" in again.output


def test_sample_questions_is_reproducible_from_ids_and_keeps_file_order() -> None:
    import hashlib

    from spanqa.evaluation import sample_questions
    from spanqa.reader.squad import load_squad

    examples = load_squad(Path(__file__).resolve().parents[1] / "fixtures" / "squad-mini.json")
    picked = sample_questions(examples, 7)
    assert len(picked) == 7 and len({e.id for e in picked}) == 7
    positions = [examples.index(e) for e in picked]
    assert positions == sorted(positions)
    # The rule, written out independently: the 7 smallest SHA-1 digests of the ids.
    expected = sorted(examples, key=lambda e: hashlib.sha1(e.id.encode()).hexdigest())[:7]
    assert {e.id for e in picked} == {e.id for e in expected}
    assert sample_questions(examples, len(examples) + 5) == examples


def test_unanswerable_split_leaves_out_articles_and_paragraphs_whose_answers_are_gone() -> None:
    from spanqa.evaluation import (
        ANSWERABLE,
        CUT_PARAGRAPH,
        UNSEEN_ARTICLE,
        article_texts,
        unanswerable_split,
    )
    from spanqa.reader.squad import load_squad

    mini = Path(__file__).resolve().parents[1] / "fixtures" / "squad-mini.json"
    for data in (FIXTURE, mini):
        examples = load_squad(data)
        split = unanswerable_split(examples)
        # A lone article is never left out (nothing would be indexed); of two or more, at least one is.
        assert bool(split.articles_left_out) == (len({e.article_index for e in examples}) > 1)
        texts = article_texts(examples, left_out=split.paragraphs_left_out)
        for e in examples:
            kind = split.kinds.get(e.id)
            if e.article_index in split.articles_left_out:
                assert kind == UNSEEN_ARTICLE
            elif kind == CUT_PARAGRAPH:
                assert (e.article_index, e.paragraph_index) in split.paragraphs_left_out
                assert not contains_answer(texts[e.article_index][1], [a.text for a in e.answers])
            elif kind == ANSWERABLE:
                assert e.context in texts[e.article_index][1]
        assert len(split.kinds) + split.dropped == len(examples)


def test_eval_squad_unanswerable_reports_abstention_and_calibration(
    settings: Settings, tmp_path: Path
) -> None:
    env = eval_env(settings)
    out = tmp_path / "eval"
    result = CliRunner().invoke(
        main,
        ["eval", "squad", str(FIXTURE), "--out", str(out), "--passages", "3", "--unanswerable", "--json"],
        env=env,
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    report = metrics["unanswerable"]
    assert metrics["articles"] == 1 and report["articles_left_out"] == 1  # of the fixture's two
    assert report["kinds"]["unseen_article"]["questions"] >= 1
    assert all(0 <= k["abstained"] <= 100 for k in report["kinds"].values())
    assert len(report["curve"]) == 20 and report["curve"][0]["right_kept"] in (0.0, 100.0)
    kept = [row["right_kept"] for row in report["curve"]]
    assert kept == sorted(kept, reverse=True)  # a higher threshold never keeps more
    records = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    assert {r["kind"] for r in records} <= {"answerable", "unseen_article", "cut_paragraph"}
    assert all(not r["right"] for r in records if r["kind"] != "answerable")
    assert all(r["features"] is None or set(r["features"]) == set(FEATURES) for r in records)


def write_synthetic_run(run: Path, questions: int, seed: int, unanswerable_every: int = 0) -> None:
    """A run's questions.jsonl whose answers are right more often the larger their margin."""
    rng = random.Random(seed)
    run.mkdir()
    lines = []
    for i in range(questions):
        margin = rng.uniform(-3, 8)
        features = {name: rng.random() for name in FEATURES} | {"margin": margin}
        kind = "cut_paragraph" if unanswerable_every and i % unanswerable_every == 0 else "answerable"
        right = kind == "answerable" and rng.random() < margin / 8
        record = {"kind": kind, "article": f"a{i % 7}", "right": right, "score": 0.5, "features": features}
        lines.append(json.dumps(record))
    (run / "questions.jsonl").write_text("\n".join(lines) + "\n")


def test_reader_calibrate_fits_a_run_and_needs_out_for_a_hub_reader(tmp_path: Path) -> None:
    from spanqa.reader.calibration import Calibrator

    run = tmp_path / "run"
    write_synthetic_run(run, 200, seed=3, unanswerable_every=5)
    env = {"SPANQA_CONFIG": "", "SPANQA_READER_MODEL": "someone/hub-reader"}
    refused = CliRunner().invoke(main, ["reader", "calibrate", str(run)], env=env)
    assert refused.exit_code == 2 and "--out" in refused.output and not Path("someone").exists()
    out = tmp_path / "calibration.json"
    result = CliRunner().invoke(main, ["reader", "calibrate", str(run), "--out", str(out), "--json"], env=env)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["answers"] == 200 and 0 <= summary["ece_cv"] <= 1 and len(summary["curve_cv"]) == 20
    assert dict(zip(Calibrator.load(out).features, Calibrator.load(out).coef, strict=True))["margin"] > 0
    other = tmp_path / "run2"
    other.mkdir()
    (other / "questions.jsonl").write_text((run / "questions.jsonl").read_text())
    arguments = ["reader", "calibrate", str(run), str(other), "--out", str(out), "--json"]
    both = CliRunner().invoke(main, arguments, env=env)
    assert both.exit_code == 0, both.output
    by_run = json.loads(both.stdout)["by_run"]
    assert set(by_run) == {str(run), str(other)} and all(0 <= row["ece_cv"] <= 1 for row in by_run.values())
    for row in by_run.values():
        declined = [point["abstain_answerable"] for point in row["curve_cv"]]
        assert declined == sorted(declined) and row["curve_cv"][0]["abstain_unanswerable"] <= 100
        assert 0 < row["ece_floor"] < 1
    # A run over documents the reader was trained on is fitted on too, its answers weighing less.
    arguments = ["reader", "calibrate", str(run), "--seen", str(other), "--out", str(out), "--json"]
    seen = CliRunner().invoke(main, [*arguments, "--seen-weight", "0.25"], env=env)
    assert seen.exit_code == 0, seen.output
    assert json.loads(seen.stdout)["answers"] == 400
    info = Calibrator.load(out).info
    assert info["seen_runs"] == [str(other)] and info["seen_weight"] == 0.25
    refused = CliRunner().invoke(main, [*arguments, "--seen-weight", "0"], env=env)
    assert refused.exit_code == 2 and "seen-weight" in refused.output


def test_reader_calibrate_records_the_weights_and_refuses_a_run_of_other_weights(tmp_path: Path) -> None:
    from spanqa.reader.calibration import WEIGHTS_KEY, Calibrator, weights_digest

    model = tmp_path / "reader"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"the weights the runs were asked with")
    run = tmp_path / "run"
    write_synthetic_run(run, 120, seed=5)
    (run / "report.json").write_text(json.dumps({WEIGHTS_KEY: weights_digest(model)}))
    env = {"SPANQA_CONFIG": "", "SPANQA_READER_MODEL": str(model)}
    fitted = CliRunner().invoke(main, ["reader", "calibrate", str(run), "--json"], env=env)
    assert fitted.exit_code == 0, fitted.output
    assert Calibrator.load(model / "calibration.json").info[WEIGHTS_KEY] == weights_digest(model)
    # The reader's weights change (retrained, averaged): the old runs no longer describe it.
    (model / "model.safetensors").write_bytes(b"other weights")
    refused = CliRunner().invoke(main, ["reader", "calibrate", str(run), "--json"], env=env)
    assert refused.exit_code == 2 and "other reader weights" in refused.output
    assert len(refused.output.strip().splitlines()) == 1
