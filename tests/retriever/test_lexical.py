"""BM25 terms, the tokenizer for technical text, fusing ranked lists and folding near-duplicates."""

from __future__ import annotations

import math
from typing import Any

import pytest

from spanqa.retriever.index import SearchHit
from spanqa.retriever.lexical import (
    Bm25Encoder,
    reciprocal_rank_fusion,
    term_id,
    tokenize,
    weighted_score_fusion,
)
from spanqa.retriever.retriever import fold
from spanqa.scoring import min_max


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("shared_buffers", ["shared_buffers", "share", "buffer"]),
        ("max_wal_size", ["max_wal_size", "max", "wal", "size"]),
        ("--prune", ["--prune", "prune"]),
        ("git --invert-match", ["git", "--invert-match", "invert", "match"]),
        ("core.abbrev", ["core.abbrev", "core", "abbrev"]),
        ("CREATE INDEX", ["creat", "index"]),
        ("upload receipts", ["upload", "receipt"]),
        ("What is the default?", ["default"]),
    ],
)
def test_identifiers_stay_whole_and_are_split(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


def test_query_terms_are_unique_with_unit_weights() -> None:
    query = Bm25Encoder().query("work_mem work_mem memory")
    assert len(query.indices) == len(set(query.indices)) == len(set(tokenize("work_mem memory")))
    assert query.values == [1.0] * len(query.indices)
    assert term_id("work_mem") in query.indices


def test_document_weights_saturate_and_normalize_by_length() -> None:
    bm25 = Bm25Encoder()
    once = dict(zip(*_pairs(bm25.document("receipt")), strict=True))[term_id("receipt")]
    twice = dict(zip(*_pairs(bm25.document("receipt receipt")), strict=True))[term_id("receipt")]
    many = dict(zip(*_pairs(bm25.document("receipt " * 50)), strict=True))[term_id("receipt")]
    assert once < twice < many < bm25.k1 + 1  # more occurrences weigh more, but never past k1 + 1
    padded = bm25.document("receipt " + "filler words here " * 40)
    assert dict(zip(*_pairs(padded), strict=True))[term_id("receipt")] < once  # longer text, lower weight


def _pairs(vector):  # type: ignore[no-untyped-def]
    return vector.indices, vector.values


def test_reciprocal_rank_fusion_by_hand() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a", "d"]], k=60)
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["b"] == pytest.approx(1 / 62)
    assert fused["d"] == pytest.approx(1 / 63)
    assert sorted(fused, key=fused.__getitem__, reverse=True) == ["a", "c", "b", "d"]
    weighted = reciprocal_rank_fusion([["a", "b"], ["b", "a"]], k=1, weights=[1.0, 3.0])
    assert weighted["b"] > weighted["a"]
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["a"]], weights=[1.0, 2.0])


def test_weighted_score_fusion_scales_each_list() -> None:
    dense = {"a": 0.9, "b": 0.5, "c": 0.1}
    lexical = {"c": 30.0, "d": 10.0}
    fused = weighted_score_fusion([dense, lexical], weights=[1.0, 1.0])
    assert fused == pytest.approx({"a": 1.0, "b": 0.5, "c": 0.0 + 1.0, "d": 0.0})
    assert min_max({"x": 2.0, "y": 2.0}) == {"x": 1.0, "y": 1.0}
    assert min_max({}) == {}
    assert all(0.0 <= v <= 1.0 and math.isfinite(v) for v in min_max({"p": -3.0, "q": 7.0}).values())


def test_near_duplicates_fold_into_the_best_hit_of_their_group() -> None:
    def hit(point: str, group: str | None = None) -> SearchHit:
        return SearchHit(point, 1.0, {"fold": group} if group else {})

    # a and c are one group (c was folded into a at ingest), b and d another; e has no group (an older index).
    hits = [hit("a", "a"), hit("b", "g"), hit("c", "a"), hit("d", "g"), hit("e"), hit("f", "f")]
    kept, copies = fold(hits, top_k=3)
    assert [h.id for h in kept] == ["a", "b", "e"]
    assert {k: [h.id for h in v] for k, v in copies.items()} == {"a": ["c"], "b": ["d"]}
    # Groups past top_k are dropped whole; nothing folds without groups.
    kept, copies = fold([hit("x"), hit("y"), hit("z")], top_k=2)
    assert [h.id for h in kept] == ["x", "y"] and copies == {}


def test_folding_searches_deeper_until_top_k_groups_are_found() -> None:
    import numpy as np

    from spanqa.retriever.retriever import Retriever

    # 30 copies of one text rank first, then 10 distinct passages.
    ranked = [SearchHit(f"copy{i}", 0.9, {"fold": "g"}) for i in range(30)]
    ranked += [SearchHit(f"own{i}", 0.5, {}) for i in range(10)]
    limits: list[int] = []

    class Index:
        def has_lexical(self, collection: str) -> bool:
            return False

        def search(self, collection: str, vector: Any, *, limit: int, filter: Any = None) -> list[SearchHit]:
            limits.append(limit)
            return ranked[:limit]

    class Encoder:
        def encode(self, texts: Any) -> np.ndarray:
            return np.ones((len(texts), 4), dtype=np.float32)

    def run(fold: bool) -> list[str]:
        limits.clear()
        retriever = Retriever(encoder=Encoder(), index=Index(), collection="c", mode="dense", fold=fold)  # type: ignore[arg-type]
        return [hit.id for hit in retriever.run("q", top_k=3).hits]

    assert run(fold=True) == ["copy0", "own0", "own1"] and limits == [6, 12, 24, 48]
    assert run(fold=False) == ["copy0", "copy1", "copy2"] and limits == [3]
