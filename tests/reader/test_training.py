from __future__ import annotations

import json
from pathlib import Path

import pytest

from spanqa.reader.squad import SquadAnswer, SquadExample, load_squad
from spanqa.reader.training import (
    TrainConfig,
    add_unanswerable_pairs,
    featurize,
    length_grouped_batches,
    train,
    without_answer_sentences,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "squad-mini.json"


def _mean_loss(model_dir: Path, config: TrainConfig) -> float:
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    from spanqa.reader.training import _collate

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForQuestionAnswering.from_pretrained(model_dir).eval()
    features = featurize(
        tokenizer,
        load_squad(config.train_file),
        max_seq_length=config.max_seq_length,
        stride=config.stride,
        max_question_tokens=config.max_question_tokens,
    )
    with torch.no_grad():
        batch = _collate(features, list(range(len(features))), tokenizer.pad_token_id or 0)
        return float(model(**batch).loss)


@pytest.fixture
def config(tmp_path: Path, tiny_qa_bert_dir: Path) -> TrainConfig:
    return TrainConfig(
        train_file=str(FIXTURE),
        init=str(tiny_qa_bert_dir),
        out_dir=str(tmp_path / "run"),
        max_seq_length=128,
        stride=32,
        batch_size=8,
        lr=3e-3,
        warmup=2,
        max_steps=30,
        save_every=10,
        eval_file=str(FIXTURE),
        eval_limit=20,
        seed=7,
    )


def test_training_lowers_the_loss_and_saves_a_loadable_checkpoint(
    config: TrainConfig, tiny_qa_bert_dir: Path
) -> None:
    before = _mean_loss(tiny_qa_bert_dir, config)
    result = train(config)
    assert result.finished and result.global_step == 30
    out = Path(config.out_dir)
    after = _mean_loss(out / "checkpoint", config)
    assert after < before
    # Evaluated at each checkpoint; the best is kept and loads through the reader's own path.
    assert [r["step"] for r in result.history] == [10, 20, 30]
    assert all("f1" in r for r in result.history)
    from spanqa.reader.reader import ExtractiveReader

    reader = ExtractiveReader(model=str(out / "best"))
    assert reader.run("Who won Super Bowl 50?", ["The Denver Broncos won Super Bowl 50."]).windows == 1
    history = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    assert history == result.history


def test_resume_continues_from_the_saved_step(config: TrainConfig) -> None:
    config.max_steps = 20
    first = train(config, resume=False, on_step=None)
    assert first.global_step == 20
    steps: list[int] = []
    config.max_steps = 25
    second = train(config, resume=True, on_step=lambda step, total, loss, rate: steps.append(step))
    assert steps[0] == 21 and second.global_step == 25
    assert second.windows_seen > first.windows_seen


def test_time_limit_stops_with_a_checkpoint(config: TrainConfig) -> None:
    config.time_limit_minutes = 0.0
    result = train(config)
    assert result.global_step == 1 and not result.finished
    assert (Path(config.out_dir) / "checkpoint" / "training_state.pt").is_file()
    # Scored as it stops: a run cut short before its first checkpoint still has a best model to export.
    assert "f1" in result.history[-1] and (Path(config.out_dir) / "best" / "config.json").is_file()


def test_resume_without_checkpoint_is_an_error(config: TrainConfig) -> None:
    from spanqa.reader.training import NoCheckpointError

    with pytest.raises(NoCheckpointError, match="no checkpoint to resume"):
        train(config, resume=True)


def test_answers_map_to_tokens_and_unanswerable_to_cls(tiny_qa_bert_dir: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_qa_bert_dir)
    examples = load_squad(FIXTURE)
    negatives = add_unanswerable_pairs(examples, 1.0, seed=3)
    assert negatives and all(n.is_impossible and not n.answers for n in negatives)
    for n in negatives:
        original = next(e for e in examples if e.id == n.id.removesuffix("-unanswerable"))
        assert not any(a.text.lower() in n.context.lower() for a in original.answers)
    features = featurize(tokenizer, examples, max_seq_length=384, stride=128, max_question_tokens=64)
    for i, ex in enumerate(examples):  # one window each at 384 tokens
        encoded = tokenizer(ex.question, ex.context, return_offsets_mapping=True)
        s, e = features.start_positions[i], features.end_positions[i]
        start_char = encoded["offset_mapping"][s][0]
        end_char = encoded["offset_mapping"][e][1]
        answer = ex.answers[0]
        assert start_char <= answer.start and end_char >= answer.start + len(answer.text)
    neg_features = featurize(tokenizer, negatives, max_seq_length=384, stride=128, max_question_tokens=64)
    assert set(neg_features.start_positions) == {0} and set(neg_features.end_positions) == {0}


def test_length_grouped_batches_cover_everything_once_and_are_deterministic() -> None:
    lengths = [(i * 37) % 101 for i in range(500)]
    a = length_grouped_batches(lengths, 16, 4, seed=1)
    b = length_grouped_batches(lengths, 16, 4, seed=1)
    assert a == b
    assert sorted(i for batch in a for i in batch) == list(range(500))
    spread = sum(max(lengths[i] for i in batch) - min(lengths[i] for i in batch) for batch in a) / len(a)
    assert spread < 40  # grouped batches pad far less than random ones (spread ~ 95)


def test_cli_train_without_a_terminal_logs_progress_lines(
    config: TrainConfig, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from click.testing import CliRunner

    from spanqa.cli import main

    training_logger = logging.getLogger("spanqa.reader.training")
    level = training_logger.level
    args = ["reader", "train", "--train", config.train_file, "--init", config.init, "--out", config.out_dir]
    args += ["--max-seq-length", "128", "--stride", "32", "--batch-size", "8"]
    args += ["--max-steps", "20", "--save-every", "20"]
    try:
        result = CliRunner().invoke(main, args)
    finally:
        training_logger.setLevel(level)
    assert result.exit_code == 0, result.output
    assert "finished at step 20/20" in result.output
    assert any("step 20/20" in record.getMessage() for record in caplog.records)


def test_export_halves_the_weights_and_keeps_the_model_card(tiny_qa_bert_dir: Path, tmp_path: Path) -> None:
    from safetensors import safe_open

    from spanqa.reader.training import export_model

    destination = tmp_path / "shipped"
    destination.mkdir()
    (destination / "MODEL_CARD.md").write_text("# card\n")
    (destination / "stale.bin").write_bytes(b"old weights")
    export_model(tiny_qa_bert_dir, destination)
    assert (destination / "MODEL_CARD.md").read_text() == "# card\n"
    assert not (destination / "stale.bin").exists()
    with safe_open(str(destination / "model.safetensors"), framework="pt") as weights:
        assert {str(weights.get_tensor(k).dtype) for k in weights.keys()} == {"torch.float16"}  # noqa: SIM118 - safe_open has keys(), no iteration


def test_training_device_auto_takes_a_gpu_only_where_torch_sees_one() -> None:
    import torch

    from spanqa.reader.training import resolve_training_device

    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_training_device("auto").type == expected
    assert resolve_training_device("cpu").type == "cpu"


def test_cli_train_rejects_a_device_torch_cannot_use(tmp_path: Path) -> None:
    import torch
    from click.testing import CliRunner

    from spanqa.cli import main

    bad = "cpu-fast" if torch.cuda.is_available() else "cuda"
    result = CliRunner().invoke(
        main, ["reader", "train", "--train", str(FIXTURE), "--out", str(tmp_path / "run"), "--device", bad]
    )
    assert result.exit_code == 2
    assert "--device" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "run").exists()


def _example(context: str, answer: str) -> SquadExample:
    start = context.index(answer)
    return SquadExample(
        id="q1",
        title="t",
        context=context,
        question="When did it open?",
        answers=(SquadAnswer(answer, start),),
    )


def test_the_answer_sentence_is_cut_out_and_the_rest_kept() -> None:
    ex = _example(
        "The museum is in Paris. It opened in 1793. It holds paintings. Its director is Ms. Kay.", "1793"
    )
    assert (
        without_answer_sentences(ex) == "The museum is in Paris. It holds paintings. Its director is Ms. Kay."
    )


def test_no_cut_when_the_answer_is_found_again_or_too_little_is_left() -> None:
    again = _example("It opened in 1793. Works came in 1793 too. It holds paintings.", "1793")
    assert without_answer_sentences(again) is None  # "1793" is still in the second sentence
    short = _example("It opened in 1793. It holds paintings.", "1793")
    assert without_answer_sentences(short) is None


def test_cut_negatives_keep_the_question_with_its_paragraph_less_the_answer() -> None:
    examples = load_squad(FIXTURE)
    negatives = add_unanswerable_pairs(examples, 1.0, seed=3, cut_share=1.0)
    by_id = {e.id: e for e in examples}
    cut = [
        n
        for n in negatives
        if without_answer_sentences(by_id[n.id.removesuffix("-unanswerable")]) == n.context
    ]
    assert cut, "no pair was made by cutting the answer's sentence out"
    for n in negatives:
        original = by_id[n.id.removesuffix("-unanswerable")]
        assert n.is_impossible and not n.answers and n.question == original.question
        assert not any(a.text.lower() in n.context.lower() for a in original.answers)
    # Without cut_share the pairs are those of before (the random stream is not touched).
    assert add_unanswerable_pairs(examples, 1.0, seed=3) == add_unanswerable_pairs(
        examples, 1.0, seed=3, cut_share=0.0
    )


def test_average_interpolates_every_weight_and_refuses_another_architecture(
    tiny_qa_bert_dir: Path, tmp_path: Path
) -> None:
    import torch
    from click.testing import CliRunner
    from transformers import AutoModelForQuestionAnswering

    from spanqa.cli import main
    from spanqa.reader.training import average_models

    base = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_bert_dir)
    tuned = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_bert_dir)
    with torch.no_grad():
        for tensor in tuned.parameters():
            tensor.add_(1.0)
    tuned.save_pretrained(tmp_path / "tuned")
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        if (tiny_qa_bert_dir / name).is_file():
            (tmp_path / "tuned" / name).write_bytes((tiny_qa_bert_dir / name).read_bytes())

    out = average_models(tmp_path / "tuned", tiny_qa_bert_dir, tmp_path / "avg", weight=0.25, half=False)
    averaged = AutoModelForQuestionAnswering.from_pretrained(out).state_dict()
    shifted = dict(tuned.named_parameters())
    for name, tensor in base.state_dict().items():
        if tensor.is_floating_point() and name in shifted:
            torch.testing.assert_close(averaged[name], tensor + 0.25)

    other = tmp_path / "other"
    deeper = base.config.to_dict() | {"num_hidden_layers": base.config.num_hidden_layers + 1}
    changed = AutoModelForQuestionAnswering.from_config(base.config.__class__(**deeper))
    changed.save_pretrained(other)
    args = ["reader", "average", str(tmp_path / "tuned"), str(other), str(tmp_path / "x"), "--weight", "0.5"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert "not the same architecture" in result.output
    assert "Traceback" not in result.output


def test_soups_score_each_weight_and_their_ends_are_the_two_readers(
    tiny_qa_bert_dir: Path, tmp_path: Path
) -> None:
    import json

    import torch
    from click.testing import CliRunner
    from transformers import AutoModelForQuestionAnswering

    from spanqa.cli import main
    from spanqa.reader.squad import load_squad
    from spanqa.reader.training import _evaluate_in_memory, score_soups

    tuned = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_bert_dir)
    torch.manual_seed(0)
    with torch.no_grad():
        for tensor in tuned.parameters():
            tensor.add_(torch.randn_like(tensor))
    tuned.save_pretrained(tmp_path / "tuned")
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        if (tiny_qa_bert_dir / name).is_file():
            (tmp_path / "tuned" / name).write_bytes((tiny_qa_bert_dir / name).read_bytes())
    examples = load_squad(FIXTURE)[:12]
    rows = score_soups(
        tmp_path / "tuned", tiny_qa_bert_dir, [0.0, 0.5, 1.0], {"mini": examples}, device="cpu"
    )
    assert [row.weight for row in rows] == [0.0, 0.5, 1.0]
    assert all(0 <= row.scores["mini"]["f1"] <= 100 for row in rows)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_qa_bert_dir)
    for row, folder in ((rows[0], tiny_qa_bert_dir), (rows[2], tmp_path / "tuned")):
        alone = AutoModelForQuestionAnswering.from_pretrained(folder).eval()
        assert row.scores["mini"]["f1"] == round(_evaluate_in_memory(alone, tokenizer, examples)["f1"], 2)

    data = ["--data", f"mini={FIXTURE}", "--limit", "12", "--device", "cpu"]
    result = CliRunner().invoke(
        main,
        [
            "reader",
            "soups",
            str(tmp_path / "tuned"),
            str(tiny_qa_bert_dir),
            "--weights",
            "0,1",
            *data,
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert [row["weight"] for row in json.loads(result.stdout)] == [0.0, 1.0]
    assert json.loads(result.stdout)[1]["mini"] == rows[2].scores["mini"]
    for bad in (["--weights", "0,x"], ["--weights", "1.5"], ["--data", "nofile"]):
        refused = CliRunner().invoke(
            main, ["reader", "soups", str(tmp_path / "tuned"), str(tiny_qa_bert_dir), *data, *bad]
        )
        assert refused.exit_code == 2 and "Traceback" not in refused.output, refused.output
