"""Retriever training and evaluation on hand-made SQuAD data and a tiny random model."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from spanqa.retriever.training import (
    RetrieverTrainConfig,
    RetrieverTrainError,
    evaluate_retriever,
    load_config,
    load_retrieval_data,
    mine_hard_negatives,
    train_retriever,
    training_columns,
)

PARAGRAPHS = [
    ("The Denver Broncos won Super Bowl 50 at Levi's Stadium.", "Who won Super Bowl 50?", "Denver Broncos"),
    ("Warsaw is the capital of Poland and lies on the Vistula.", "What river is Warsaw on?", "Vistula"),
    ("Oxygen has the atomic number 8 and the symbol O.", "What is oxygen's atomic number?", "8"),
    ("The Amazon rainforest covers much of the Amazon basin.", "What does the forest cover?", "Amazon basin"),
    ("The Apollo program landed the first humans on the Moon.", "What did Apollo land on?", "the Moon"),
    ("The Black Death peaked in Europe from 1347 to 1351.", "When did the Black Death peak?", "1347 to 1351"),
    ("Super Bowl 50 was played in Santa Clara, California.", "Where was Super Bowl 50?", "Santa Clara"),
    ("Poland's largest city is Warsaw, on the Vistula river.", "What is Poland's largest city?", "Warsaw"),
]


def _squad(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    paragraphs = [
        {
            "context": context,
            "qas": [
                {
                    "id": f"q{i}",
                    "question": question,
                    "answers": [{"text": answer, "answer_start": context.index(answer)}],
                }
            ],
        }
        for i, (context, question, answer) in enumerate(rows)
    ]
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}))
    return path


def test_data_and_hard_negatives(tmp_path: Path) -> None:
    data = load_retrieval_data(_squad(tmp_path / "train.json", PARAGRAPHS))
    assert len(data.questions) == len(data.paragraphs) == len(PARAGRAPHS)
    negatives = mine_hard_negatives(data, 3)
    for question, gold, found, answers in zip(
        data.questions, data.paragraph_of, negatives, data.answers, strict=True
    ):
        assert gold not in found and len(found) <= 3, question
        for index in found:  # a paragraph that holds the answer is never a negative
            assert not any(a.lower() in data.paragraphs[index].lower() for a in answers)
    # "Who won Super Bowl 50?": the other Super Bowl paragraph is the hardest negative BM25 finds.
    assert negatives[0][0] == 6
    sample = load_retrieval_data(tmp_path / "train.json", limit=3, seed=1)
    assert len(sample.questions) == 3 and len(sample.paragraphs) == len(PARAGRAPHS)
    with pytest.raises(RetrieverTrainError, match="not SQuAD-format"):
        load_retrieval_data(_write(tmp_path / "bad.json", "[1, 2]"))


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("loss", "columns"),
    [
        ("mnr", ["anchor", "positive", "negative_1"]),
        ("triplet", ["anchor", "positive", "negative"]),
        ("cosine", ["sentence1", "sentence2", "score"]),
        ("softmax", ["sentence1", "sentence2", "label"]),
    ],
)
def test_training_columns_per_loss(tmp_path: Path, loss: str, columns: list[str]) -> None:
    data = load_retrieval_data(_squad(tmp_path / "train.json", PARAGRAPHS))
    config = RetrieverTrainConfig(train_file="", init="", out_dir="", loss=loss, hard_negatives=1)
    built = training_columns(config, data)
    assert list(built) == columns
    sizes = {len(values) for values in built.values()}
    assert len(sizes) == 1 and sizes.pop() >= len(PARAGRAPHS) - 1
    if loss in ("cosine", "softmax"):
        assert sorted(set(built[columns[-1]])) == [0, 1]  # each question with its paragraph and a negative


def _tiny_run(tmp_path: Path, tiny_bert_dir: Path, **changes: Any) -> RetrieverTrainConfig:
    """A few CPU steps over the hand-made pairs, from the tiny model, into tmp_path/run."""
    config = RetrieverTrainConfig(
        train_file=str(_squad(tmp_path / "train.json", PARAGRAPHS)),
        init=str(tiny_bert_dir),
        out_dir=str(tmp_path / "run"),
        batch_size=4,
        lr=5e-3,
        warmup=0,
        max_seq_length=32,
        max_steps=12,
        save_every=2,
        device="cpu",
    )
    return dataclasses.replace(config, **changes)


def test_a_few_steps_lower_the_loss_save_a_model_and_resume(tmp_path: Path, tiny_bert_dir: Path) -> None:
    config = _tiny_run(tmp_path, tiny_bert_dir)
    first = train_retriever(config)
    assert first.global_step == 12 and len(first.losses) == 6
    assert sum(first.losses[-2:]) < sum(first.losses[:2])  # it learns the hand-made pairs
    from sentence_transformers import SentenceTransformer

    vectors = SentenceTransformer(str(first.final), device="cpu").encode(["Who won?", "Where?"])
    assert vectors.shape == (2, 32)
    assert abs(float((vectors[0] ** 2).sum()) - 1.0) < 1e-4  # still normalized: a dot product is the cosine
    resumed = train_retriever(
        RetrieverTrainConfig(**{**load_config(tmp_path / "run").__dict__, "max_steps": 16}), resume=True
    )
    # It went on from step 12 (the log it restored, then two more entries), not from 0.
    assert resumed.global_step == 16 and resumed.losses[:6] == first.losses and len(resumed.losses) == 8


def test_recall_on_a_hand_made_corpus(tmp_path: Path, tiny_bert_dir: Path) -> None:
    # Each question is its paragraph's own text: any mean-pooled model ranks it first (cosine 1).
    rows = [(context, context, answer) for context, _, answer in PARAGRAPHS]
    metrics = evaluate_retriever(str(tiny_bert_dir), _squad(tmp_path / "dev.json", rows), device="cpu")
    assert metrics["recall"] == {"@1": 1.0, "@5": 1.0, "@10": 1.0, "@20": 1.0} and metrics["mrr@10"] == 1.0
    real = evaluate_retriever(str(tiny_bert_dir), _squad(tmp_path / "q.json", PARAGRAPHS), device="cpu")
    recalls = list(real["recall"].values())
    assert recalls == sorted(recalls) and recalls[-1] == 1.0  # 8 paragraphs: all are in the first 20
    assert real["questions"] == len(PARAGRAPHS) and 0 < real["mrr@10"] <= 1


def test_distilling_into_fewer_layers(tmp_path: Path, tiny_bert_dir: Path) -> None:
    from sentence_transformers import SentenceTransformer

    config = _tiny_run(tmp_path, tiny_bert_dir, loss="distill", keep_layers=(1,), max_steps=16)
    result = train_retriever(config)
    assert result.global_step == 16
    assert sum(result.losses[-2:]) < sum(result.losses[:2])  # it moves toward the teacher's embeddings
    student = SentenceTransformer(str(result.final), device="cpu")
    assert student[0].auto_model.config.num_hidden_layers == 1  # saved as the smaller model it is
    assert student.encode(["Who won?"]).shape == (1, 32)
    assert load_config(tmp_path / "run").keep_layers == (1,)  # --resume gets the same cut
    with pytest.raises(RetrieverTrainError, match="layers 0 to 1"):
        train_retriever(dataclasses.replace(config, keep_layers=(0, 2), out_dir=str(tmp_path / "bad")))


def test_distillation_columns_label_every_text_once(tmp_path: Path, tiny_bert_dir: Path) -> None:
    from spanqa.retriever.training import distillation_columns, load_bi_encoder

    rows = [*PARAGRAPHS, PARAGRAPHS[0]]  # a repeated question and paragraph are embedded once
    data = load_retrieval_data(_squad(tmp_path / "train.json", rows))
    teacher = load_bi_encoder(str(tiny_bert_dir))
    columns = distillation_columns(teacher, data)
    assert len(columns["sentence"]) == len(set(columns["sentence"])) == 2 * len(PARAGRAPHS)
    expected = teacher.encode([columns["sentence"][3]])[0]
    assert columns["label"][3] == pytest.approx(expected.tolist(), abs=1e-5)
