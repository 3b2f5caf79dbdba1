from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanqa.ingest.chunker import ChunkSpan, chunk_blocks
from spanqa.ingest.loaders import Block
from spanqa.text import sentence_spans


def chunk_text(text: str, tokenizer: Any, **options: Any) -> list[ChunkSpan]:
    """Plain text as one block: the chunker's sentence windows and overlap alone."""
    return chunk_blocks(text, [Block(0, len(text))] if text else [], tokenizer, **options)


@pytest.fixture(scope="module")
def tokenizer(tiny_bert_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_bert_dir)


def n_tokens(tokenizer: Any, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


TEXTS = st.lists(
    st.one_of(
        st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30),
        st.sampled_from([" ", "\u00a0", "\n", "\n\n", ". ", "! ", "? ", "…", "\t"]),
    ),
    max_size=80,
).map("".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXTS, chunk_tokens=st.integers(4, 60), overlap=st.integers(0, 20))
def test_chunks_are_exact_slices_in_order(tokenizer: Any, text: str, chunk_tokens: int, overlap: int) -> None:
    spans = chunk_text(text, tokenizer, chunk_tokens=chunk_tokens, overlap_tokens=overlap)
    if text.strip():
        assert spans
    previous_start = -1
    for span in spans:
        piece = text[span.char_start : span.char_end]
        assert piece and piece == piece.strip()
        assert span.char_start > previous_start  # always moves forward
        previous_start = span.char_start
    if spans:
        # Every non-space character is covered by some chunk.
        covered = [False] * len(text)
        for span in spans:
            for i in range(span.char_start, span.char_end):
                covered[i] = True
        assert all(covered[i] for i, ch in enumerate(text) if not ch.isspace())


def test_chunks_respect_the_token_budget_and_sentence_boundaries(tokenizer: Any) -> None:
    sentences = [f"Sentence number {i} talks about the Denver Broncos and Santa Clara." for i in range(40)]
    text = " ".join(sentences)
    spans = chunk_text(text, tokenizer, chunk_tokens=90, overlap_tokens=40)
    assert n_tokens(tokenizer, sentences[0]) <= 40
    assert len(spans) > 5
    for span in spans:
        piece = text[span.char_start : span.char_end]
        assert n_tokens(tokenizer, piece) <= 90
        assert piece.startswith("Sentence") and piece.endswith(".")
    # Consecutive chunks overlap by whole sentences.
    assert any(b.char_start < a.char_end for a, b in itertools.pairwise(spans))


def test_overlong_sentences_are_cut_on_token_boundaries(tokenizer: Any) -> None:
    text = "word " * 500
    spans = chunk_text(text.strip(), tokenizer, chunk_tokens=50, overlap_tokens=10)
    assert all(n_tokens(tokenizer, text[s.char_start : s.char_end]) <= 50 for s in spans)
    assert spans[-1].char_end == len(text.strip())


def test_pages_are_where_chunks_start(tokenizer: Any) -> None:
    page1 = "First page text. " * 20
    text = page1 + "\n\n" + "Second page text. " * 20
    spans = chunk_text(
        text, tokenizer, chunk_tokens=20, overlap_tokens=0, page_starts=[(1, 0), (2, len(page1) + 2)]
    )
    assert spans[0].page == 1 and spans[-1].page == 2
    assert all((s.page == 1) == (s.char_start < len(page1) + 2) for s in spans)


def test_sentence_spans() -> None:
    text = "  One. Two!  Three?\n\nFour (“quoted.”) Five"
    pieces = [text[s:e] for s, e in sentence_spans(text)]
    assert pieces == ["One.", "Two!", "Three?", "Four (“quoted.”)", "Five"]
