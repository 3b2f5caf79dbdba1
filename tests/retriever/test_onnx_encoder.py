from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from spanqa.retriever.encoder import EncoderLoadError, SentenceEncoder
from spanqa.retriever.onnx_encoder import OnnxEncoder, UnsupportedForOnnx, own_pooling
from spanqa.runtime import Runtime
from spanqa.settings import Settings

TEXTS = [
    "Which NFL team won Super Bowl 50?",
    "The Denver Broncos defeated the Carolina Panthers 24 to 10 at Levi's Stadium in Santa Clara.",
    "Café naïve Zürich 東京 🙂",
    "",
    "word " * 400,  # longer than max_seq_length: cut, as sentence-transformers cuts it
]


def test_same_vectors_as_sentence_transformers(tiny_bert_dir: Path, tmp_path: Path) -> None:
    onnx = OnnxEncoder(model=str(tiny_bert_dir), cache_dir=tmp_path, max_seq_length=64, batch_size=2)
    torch_encoder = SentenceEncoder(model=str(tiny_bert_dir), max_seq_length=64)
    a, b = onnx.encode(TEXTS), torch_encoder.encode(TEXTS)
    assert a.shape == b.shape == (len(TEXTS), torch_encoder.dimension)
    assert np.abs(a - b).max() < 1e-4
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert onnx.encode([]).shape == (0, onnx.dimension)


def test_export_is_cached_and_refreshed_when_the_model_changes(tiny_bert_dir: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(tiny_bert_dir, model)
    cache = tmp_path / "cache"
    OnnxEncoder(model=str(model), cache_dir=cache).warm_up()
    first = sorted(cache.glob("*.onnx"))
    OnnxEncoder(model=str(model), cache_dir=cache).warm_up()
    assert sorted(cache.glob("*.onnx")) == first and len(first) == 1
    config = json.loads((model / "config.json").read_text())
    config["layer_norm_eps"] = 1e-6
    (model / "config.json").write_text(json.dumps(config))
    OnnxEncoder(model=str(model), cache_dir=cache).warm_up()
    assert len(list(cache.glob("*.onnx"))) == 2


def test_models_onnx_cannot_serve_are_refused(tmp_path: Path, tiny_bert_dir: Path) -> None:
    with pytest.raises(UnsupportedForOnnx):
        OnnxEncoder(model="some-org/not-downloaded", cache_dir=tmp_path).warm_up()
    model = tmp_path / "cls-pooled"
    shutil.copytree(tiny_bert_dir, model)
    (model / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            ]
        )
    )
    (model / "1_Pooling").mkdir()
    dim = json.loads((model / "config.json").read_text())["hidden_size"]
    (model / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": dim, "pooling_mode_cls_token": True})
    )
    assert own_pooling(model) == "cls"
    # A CLS-pooled model runs on ONNX Runtime too, pooled as sentence-transformers pools it.
    onnx, torch_encoder = OnnxEncoder(model=str(model), cache_dir=tmp_path), SentenceEncoder(model=str(model))
    assert np.abs(onnx.encode(TEXTS[:2]) - torch_encoder.encode(TEXTS[:2])).max() < 1e-4
    (model / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode": "mean"}))  # v6's way
    assert own_pooling(model) == "mean"
    (model / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode": ["mean", "max"]}))
    assert own_pooling(model) is None  # two modes side by side: twice the dimension, left to torch
    with pytest.raises(UnsupportedForOnnx):
        OnnxEncoder(model=str(model), cache_dir=tmp_path).warm_up()


def test_runtime_picks_onnx_and_falls_back_to_torch(settings: Settings, tmp_path: Path) -> None:
    with Runtime(settings) as runtime:
        assert isinstance(runtime.encoder, OnnxEncoder)
    with Runtime(settings.replace(encoder_backend="torch")) as runtime:
        assert isinstance(runtime.encoder, SentenceEncoder)
    model = tmp_path / "cls-pooled"
    shutil.copytree(settings.retriever_model, model)
    (model / "modules.json").write_text(
        json.dumps([{"type": "sentence_transformers.models.Dense", "path": "x"}])
    )
    with Runtime(settings.replace(retriever_model=str(model))) as runtime:
        assert isinstance(runtime.encoder, SentenceEncoder)


@pytest.mark.parametrize("mode", ["mean", "cls", "max"])
def test_pooling_modes_agree_between_backends(tiny_bert_dir: Path, tmp_path: Path, mode: str) -> None:
    onnx = OnnxEncoder(model=str(tiny_bert_dir), cache_dir=tmp_path, max_seq_length=64, pooling=mode)
    torch_encoder = SentenceEncoder(model=str(tiny_bert_dir), max_seq_length=64, pooling=mode)
    a, b = onnx.encode(TEXTS[:3]), torch_encoder.encode(TEXTS[:3])
    assert a.shape == b.shape == (3, torch_encoder.dimension) and np.abs(a - b).max() < 1e-4
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert onnx.pooling == torch_encoder.pooling == mode
    own = OnnxEncoder(model=str(tiny_bert_dir), cache_dir=tmp_path, max_seq_length=64).encode(TEXTS[:3])
    if mode == "mean":  # the tiny model's own pooling: "auto" gives the same vectors
        assert np.abs(a - own).max() < 1e-5
    else:  # another pooling gives other vectors
        assert np.abs(a - own).max() > 1e-3


def test_pool_by_hand() -> None:
    from spanqa.retriever.onnx_encoder import pool

    hidden = np.array([[[1.0, 5.0], [3.0, -1.0], [100.0, 100.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]])  # the third token is padding: never pooled
    assert pool(hidden, mask, "mean").tolist() == [[2.0, 2.0]]
    assert pool(hidden, mask, "cls").tolist() == [[1.0, 5.0]]
    assert pool(hidden, mask, "max").tolist() == [[3.0, 5.0]]


def test_int8_copy_is_made_once_and_gives_near_vectors(tiny_bert_dir: Path, tmp_path: Path) -> None:
    fp32 = OnnxEncoder(model=str(tiny_bert_dir), cache_dir=tmp_path, max_seq_length=64)
    int8 = OnnxEncoder(model=str(tiny_bert_dir), cache_dir=tmp_path, max_seq_length=64, precision="int8")
    a, b = fp32.encode(TEXTS), int8.encode(TEXTS)
    assert b.shape == a.shape and np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    assert np.abs(a - b).max() > 0  # another model ran
    assert float(np.min(np.sum(a * b, axis=1))) > 0.9  # and it points the same way
    made = sorted(p.name for p in tmp_path.glob("*.onnx"))
    assert len(made) == 2 and any(name.endswith("-int8pc.onnx") for name in made)
    OnnxEncoder(model=str(tiny_bert_dir), cache_dir=tmp_path, precision="int8").warm_up()
    assert sorted(p.name for p in tmp_path.glob("*.onnx")) == made
    with pytest.raises(ValueError, match="fp32 or int8"):
        OnnxEncoder(model=str(tiny_bert_dir), cache_dir=tmp_path, precision="fp16").warm_up()


def test_runtime_resolves_the_encoder_precision(settings: Settings, tmp_path: Path) -> None:
    for asked, loaded in [("auto", "int8"), ("int8", "int8"), ("fp32", "fp32")]:
        with Runtime(settings.replace(encoder_precision=asked)) as runtime:
            encoder = runtime.encoder
            assert isinstance(encoder, OnnxEncoder) and encoder.precision == loaded
    with Runtime(settings.replace(encoder_backend="torch", encoder_precision="auto")) as runtime:
        assert isinstance(runtime.encoder, SentenceEncoder)  # "auto" is fp32 on torch
    with (
        Runtime(settings.replace(encoder_backend="torch", encoder_precision="int8")) as runtime,
        pytest.raises(EncoderLoadError, match=r"'int8' needs ONNX Runtime; encoder_backend is 'torch'"),
    ):
        _ = runtime.encoder
    model = tmp_path / "dense-head"
    shutil.copytree(settings.retriever_model, model)
    dense_head = [{"type": "sentence_transformers.models.Dense", "path": "x"}]
    (model / "modules.json").write_text(json.dumps(dense_head))
    with (
        Runtime(settings.replace(retriever_model=str(model), encoder_precision="int8")) as runtime,
        pytest.raises(EncoderLoadError, match=r"encoder_precision 'int8' needs ONNX Runtime: .*pool"),
    ):
        _ = runtime.encoder
