from __future__ import annotations

from pathlib import Path

import pytest

from spanqa import pipeline
from spanqa.runtime import Runtime
from spanqa.settings import Settings
from spanqa.types import AskOptions, SearchOptions


@pytest.fixture
def indexed(settings: Settings, tmp_path: Path) -> Settings:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text(
        "Super Bowl 50 was played in Santa Clara. The Denver Broncos won the game.\n\n" * 6
        + "Zürich café naïve 東京 🙂 unicode words here. " * 10
    )
    (docs / "b.md").write_text("# Poland\n\nWarsaw is the capital of Poland. It lies on the Vistula.\n" * 8)
    with Runtime(settings) as runtime:
        report = runtime.ingest_job().run([docs])
        assert report.exit_code == 0
    return settings


def test_answers_are_exact_spans_of_their_documents(indexed: Settings) -> None:
    # Never abstain: check every span the reader gives.
    settings = indexed.replace(no_answer_threshold=-1e9, min_score=0.0)
    with Runtime(settings) as runtime:
        for question in ["Who won Super Bowl 50?", "What is the capital of Poland?", "café?"]:
            result = pipeline.ask(runtime, question, AskOptions(passages=5, answers=5))
            assert result.answers
            assert set(result.timings) == {"encode", "search", "read", "total"}
            scores = [a.score for a in result.answers]
            assert scores == sorted(scores, reverse=True) and all(0 < s <= 1 for s in scores)
            assert sum(scores) <= 1 + 1e-9
            texts = [a.text.lower().strip(" .,") for a in result.answers]
            assert len(texts) == len(set(texts))  # the same answer is not listed twice
            seen: list[tuple[str, int, int]] = []
            for answer in result.answers:
                document = runtime.catalog.get_document(answer.document_id)
                assert document is not None
                assert document.text[answer.char_start : answer.char_end] == answer.text
                assert (
                    answer.passage.char_start
                    <= answer.char_start
                    < answer.char_end
                    <= answer.passage.char_end
                )
                assert answer.text in answer.context
                assert (
                    document.text[answer.context_start : answer.context_start + len(answer.context)]
                    == answer.context
                )
                for doc_id, start, end in seen:  # no overlapping duplicates in one document
                    assert (
                        doc_id != answer.document_id or end <= answer.char_start or answer.char_end <= start
                    )
                seen.append((answer.document_id, answer.char_start, answer.char_end))


def test_abstains_when_no_span_beats_no_answer(indexed: Settings) -> None:
    with Runtime(indexed.replace(no_answer_threshold=1e9)) as runtime:
        result = pipeline.ask(runtime, "Who won Super Bowl 50?")
        assert result.abstained and result.answers == [] and result.passages


def test_ask_result_survives_a_json_round_trip() -> None:
    import json

    from spanqa.pipeline import AskResult
    from spanqa.types import Answer, AnswerSource, Passage, PassageCopy

    copy = PassageCopy("c9", "d2", "/docs/b.txt", 40, 52, "Broncos won.")
    passage = Passage(
        "c1", "d1", "/docs/a.pdf", "Broncos won.", 10, 22, 0.61, page=2, ordinal=3, rank=1, copies=(copy,)
    )
    answer = Answer(
        "Broncos",
        0.9,
        "/docs/a.pdf",
        "d1",
        10,
        17,
        2,
        passage,
        14.5,
        0.61,
        "Broncos won.",
        10,
        also_in=(AnswerSource("/docs/b.txt", "d2", 40, 47),),
    )
    result = AskResult("Who won?", [answer], [passage], {"encode": 0.01, "read": 0.2})
    assert AskResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    empty = AskResult("Nothing?", [], [], {})
    assert AskResult.from_dict(json.loads(json.dumps(empty.to_dict()))) == empty


def test_worker_command_reads_questions_first() -> None:
    from spanqa.cli.workers import worker
    from spanqa.workers.names import DEFAULT_WORKER_QUEUES

    queues = next(p for p in worker.params if p.name == "queues")
    assert queues.default == DEFAULT_WORKER_QUEUES


def test_a_folded_group_whose_best_point_lost_its_row_is_read_from_a_copy(
    settings: Settings, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    text = "Warsaw is the capital of Poland. It lies on the Vistula river.\n"
    for name in ("a.txt", "b.txt", "c.txt"):
        (docs / name).write_text(text)  # one text three times: one group
    with Runtime(settings) as runtime:
        assert runtime.ingest_job().run([docs]).exit_code == 0
        (passage,) = pipeline.search(runtime, "capital of Poland", SearchOptions(top_k=1)).passages
        assert len(passage.copies) == 2
        # The catalog loses the best point's document (as a crash, or an ingest not yet committed, leaves
        # a point without its row): the group is still read, from a copy that has one.
        runtime.catalog.mark_deleted(passage.document_id)
        (again,) = pipeline.search(runtime, "capital of Poland", SearchOptions(top_k=1)).passages
        assert again.document_id != passage.document_id and again.text == text.strip()
        assert len(again.copies) == 1 and again.copies[0].document_id != passage.document_id


def test_a_calibrator_fitted_with_other_settings_warns_once(indexed: Settings) -> None:
    from spanqa.reader.calibration import FEATURES, Calibrator

    zeros, ones = (0.0,) * len(FEATURES), (1.0,) * len(FEATURES)
    fitted = {**indexed.score_settings(), "passages": indexed.passages + 5}
    calibrator = Calibrator(FEATURES, zeros, ones, zeros, 0.0, info={"settings": fitted})
    with Runtime(indexed) as runtime:
        runtime._calibrator, runtime._calibrator_loaded = calibrator, True
        first = pipeline.ask(runtime, "Who won Super Bowl 50?", AskOptions(passages=3))
        second = pipeline.ask(runtime, "What is the capital of Poland?", AskOptions(passages=3))
    [warning] = [w for w in first.warnings if "calibrated with other settings" in w]
    assert f"passages (fitted with {indexed.passages + 5}, now {indexed.passages})" in warning
    assert not any("calibrated" in w for w in second.warnings)
    # The same settings, but weights other than those it was fitted for: the score means something else.
    with Runtime(indexed) as runtime:
        info = {"settings": indexed.score_settings(), "reader_weights": "0123456789abcdef"}
        runtime._calibrator = Calibrator(FEATURES, zeros, ones, zeros, 0.0, info=info)
        runtime._calibrator_loaded = True
        assert runtime.reader_weights not in (None, "0123456789abcdef")
        warning = runtime.calibration_warning()
        assert warning is not None and "weights (fitted with 0123456789abcdef" in warning
    # The same settings: nothing to say.
    with Runtime(indexed) as runtime:
        same = Calibrator(FEATURES, zeros, ones, zeros, 0.0, info={"settings": indexed.score_settings()})
        runtime._calibrator, runtime._calibrator_loaded = same, True
        assert runtime.calibration_warning() is None
