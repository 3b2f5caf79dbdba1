"""Windows cut with the tokenizers library alone are transformers' windows; reading needs no transformers."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from spanqa.reader.tokenization import SpanTokenizer

WORDS = [
    "the",
    "Broncos",
    "beat",
    "Panthers",
    "24",
    "10",
    "at",
    "Levi's",
    "Stadium",
    "in",
    "Santa",
    "Clara,",
    "California",
    "Zürich",
    "東京",
    "-v",
    "--invert-match",
]


@pytest.mark.parametrize("model_fixture", ["tiny_qa_bert_dir", "tiny_qa_roberta_dir"])
def test_windows_match_transformers(model_fixture: str, request: pytest.FixtureRequest) -> None:
    from transformers import AutoTokenizer

    folder: Path = request.getfixturevalue(model_fixture)
    reference = AutoTokenizer.from_pretrained(str(folder))
    ours = SpanTokenizer.from_folder(folder, token_types="token_type_ids" in reference.model_input_names)
    loaded = SpanTokenizer.from_transformers(reference)
    fields = ("cls_id", "pad_id", "pad_right", "token_types")
    assert [getattr(ours, f) for f in fields] == [getattr(loaded, f) for f in fields]
    assert (ours.cls_id, ours.pad_id) == (reference.cls_token_id, reference.pad_token_id)
    rng = random.Random(7)
    compared = 0
    for _ in range(40):
        question = " ".join(rng.choices(WORDS, k=rng.randint(1, 12)))
        passages = [" ".join(rng.choices(WORDS, k=rng.randint(0, 120))) for _ in range(3)]
        max_seq_length, stride = rng.choice([(64, 16), (48, 40), (128, 0)])
        question = ours.truncate_question(question, 16)
        windows = [
            w
            for per in ours.windows(question, passages, max_seq_length=max_seq_length, stride=stride)
            for w in per
        ]
        room = (
            max_seq_length
            - len(reference(question, add_special_tokens=False)["input_ids"])
            - reference.num_special_tokens_to_add(pair=True)
        )
        expected = reference(
            [question] * len(passages),
            passages,
            truncation="only_second",
            max_length=max_seq_length,
            stride=max(0, min(stride, room - 1)),
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
        )
        assert len(windows) == len(expected["input_ids"])
        for i, window in enumerate(windows):
            assert window.ids == list(expected["input_ids"][i])
            if ours.token_types:
                assert window.type_ids == list(expected["token_type_ids"][i])
            assert ours.passage_offsets(window) == [
                tuple(o) if s == 1 else None
                for o, s in zip(expected["offset_mapping"][i], expected.sequence_ids(i), strict=True)
            ]
            compared += 1
    assert compared > 120  # long passages were cut in several windows


def test_truncate_question_cuts_on_a_token_boundary(tiny_qa_bert_dir: Path) -> None:
    tokenizer = SpanTokenizer.from_folder(tiny_qa_bert_dir)
    question = "the Broncos beat the Panthers at Levi's Stadium"
    assert tokenizer.truncate_question(question, 100) == question
    cut = tokenizer.truncate_question(question, 3)
    assert question.startswith(cut) and len(cut) < len(question) and not cut.endswith(" ")
    assert len(tokenizer.backend.encode(cut, add_special_tokens=False).ids) == 3


def test_reading_on_onnx_never_imports_transformers(tiny_qa_bert_dir: Path, tmp_path: Path) -> None:
    from spanqa.reader.reader import ExtractiveReader

    ExtractiveReader(model=str(tiny_qa_bert_dir), cache_dir=tmp_path).warm_up()  # exports (needs torch)
    script = (
        "import sys\n"
        "from reader.reader import ExtractiveReader\n"
        f"reader = ExtractiveReader(model={str(tiny_qa_bert_dir)!r}, cache_dir={str(tmp_path)!r})\n"
        "result = reader.run('Who won?', ['The Broncos won the game.'])\n"
        "assert result.windows == 1, result\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('transformers', 'torch')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
