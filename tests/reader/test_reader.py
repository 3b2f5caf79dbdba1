from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanqa.reader.model import ReaderLoadError, load_reader_model, resolve_reader_model
from spanqa.reader.reader import ExtractiveReader

WORDS = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=25
).filter(lambda w: w.strip() != "")
PASSAGES = st.lists(WORDS, min_size=1, max_size=120).map(" ".join)


@pytest.fixture(scope="module", params=["bert", "roberta"])
def tiny_reader(request: pytest.FixtureRequest) -> ExtractiveReader:
    directory = request.getfixturevalue(f"tiny_qa_{request.param}_dir")
    # Small windows so that passages of a few dozen words span several windows.
    reader = ExtractiveReader(
        model=str(directory), max_seq_length=48, stride=16, max_question_tokens=12, top_k=20
    )
    reader.warm_up()
    return reader


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=WORDS, passages=st.lists(PASSAGES, min_size=1, max_size=3))
def test_every_span_is_an_exact_substring_of_its_passage(
    tiny_reader: ExtractiveReader, question: str, passages: list[str]
) -> None:
    result = tiny_reader.run(question, passages)
    assert result.windows >= len(passages)
    for span in result.spans:
        text = passages[span.passage_index][span.char_start : span.char_end]
        assert 0 <= span.char_start < span.char_end <= len(passages[span.passage_index])
        assert text == text.strip() and text
        assert span.end_token >= span.start_token
        assert span.end_token - span.start_token < tiny_reader.max_answer_tokens
    scores = [s.score for s in result.spans]
    assert scores == sorted(scores, reverse=True)


def test_long_passages_are_read_in_several_windows(tiny_reader: ExtractiveReader) -> None:
    passage = " ".join(f"word{i % 10} Denver" for i in range(200))
    result = tiny_reader.run("Who won Super Bowl 50?", [passage])
    assert result.windows > 5
    assert result.spans


def test_batch_keeps_questions_apart(tiny_reader: ExtractiveReader) -> None:
    items = [("Who won?", ["Denver won the game."]), ("Where?", ["It was in Santa Clara.", "Zürich café."])]
    batched = tiny_reader.run_batch(items)
    single = [tiny_reader.run(q, p) for q, p in items]
    for b, s in zip(batched, single, strict=True):
        assert [(x.passage_index, x.char_start, x.char_end) for x in b.spans] == [
            (x.passage_index, x.char_start, x.char_end) for x in s.spans
        ]
        assert [x.score for x in b.spans] == pytest.approx([x.score for x in s.spans], abs=1e-4)


def test_no_passages_gives_no_spans(tiny_reader: ExtractiveReader) -> None:
    result = tiny_reader.run("Who?", [])
    assert result.spans == [] and result.abstains()


def test_missing_path_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ReaderLoadError) as info:
        load_reader_model(str(tmp_path / "nope"))
    message = str(info.value)
    assert "\n" not in message and "SPANQA_READER_MODEL" in message


def test_hub_name_without_network_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ReaderLoadError) as info:
        load_reader_model("deepset/roberta-base-squad2-not-cached")
    assert "\n" not in str(info.value) and "SPANQA_READER_MODEL" in str(info.value)


def test_shipped_name_resolves_to_the_models_folder() -> None:
    from spanqa.reader.model import SHIPPED_MODELS_DIR

    if (SHIPPED_MODELS_DIR / "spanqa-reader-minilm").is_dir():
        assert resolve_reader_model("spanqa-reader-minilm") == str(
            SHIPPED_MODELS_DIR / "spanqa-reader-minilm"
        )
    else:
        with pytest.raises(ReaderLoadError):
            resolve_reader_model("spanqa-reader-minilm")


def test_batch_size_zero_picks_one_window_per_pass_on_cpu(tiny_qa_bert_dir: Path) -> None:
    assert ExtractiveReader(model=str(tiny_qa_bert_dir)).batch_size == 1
    assert ExtractiveReader(model=str(tiny_qa_bert_dir), device="cuda").batch_size == 32
    assert ExtractiveReader(model=str(tiny_qa_bert_dir), batch_size=8).batch_size == 8


def test_answers_do_not_depend_on_the_batch_size(tiny_qa_bert_dir: Path) -> None:
    passages = ["Denver beat Carolina in Santa Clara. " * 9, "short", "Levi's Stadium hosted the game. " * 4]
    results = [
        ExtractiveReader(model=str(tiny_qa_bert_dir), max_seq_length=48, stride=16, batch_size=size).run(
            "Who won the game?", passages
        )
        for size in (1, 3)
    ]
    assert results[0].windows == results[1].windows > len(passages)
    assert [(s.passage_index, s.char_start, s.char_end) for s in results[0].spans] == [
        (s.passage_index, s.char_start, s.char_end) for s in results[1].spans
    ]
    assert [s.score for s in results[0].spans] == pytest.approx([s.score for s in results[1].spans], abs=1e-4)
