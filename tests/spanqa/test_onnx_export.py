"""Export bookkeeping shared by both stages: cache names that follow the weights and the export recipe."""

from __future__ import annotations

from pathlib import Path

import pytest

import spanqa.onnx_export
from spanqa.onnx_export import cached_export_path, open_session


def test_export_name_changes_with_the_recipe(tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = Path("/cache")
    current = cached_export_path(cache, tiny_bert_dir, "reader")
    assert current == cached_export_path(cache, tiny_bert_dir, "reader")
    assert current.name.startswith(f"{tiny_bert_dir.name}-reader-") and current.suffix == ".onnx"
    monkeypatch.setattr(spanqa.onnx_export, "EXPORT_RECIPE", spanqa.onnx_export.EXPORT_RECIPE + 1)
    # An export made the old way is never served once the way models are exported changes.
    assert cached_export_path(cache, tiny_bert_dir, "reader") != current


def test_sessions_do_not_spin_idle_threads(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from spanqa.retriever.onnx_encoder import OnnxEncoder

    encoder = OnnxEncoder(model=str(tiny_bert_dir), cache_dir=tmp_path)
    encoder.warm_up()
    (exported,) = tmp_path.glob("*.onnx")
    options = open_session(exported, threads=1).get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.intra_op_num_threads == 1
