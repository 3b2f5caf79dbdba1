"""The reader on ONNX Runtime: the same logits and answers as torch, cached exports, clear errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from spanqa.reader.model import ReaderLoadError, make_windows, run_windows
from spanqa.reader.onnx_model import OnnxSpanModel
from spanqa.reader.reader import ExtractiveReader

QUESTION = "Who won Super Bowl 50?"
PASSAGES = [
    "Super Bowl 50 was won by the Denver Broncos, who beat the Carolina Panthers 24 to 10.",
    "Café naïve Zürich 東京 🙂 " * 3,
    "A long passage that needs more than one window. " * 40,
]


@pytest.mark.parametrize("model_fixture", ["tiny_qa_bert_dir", "tiny_qa_roberta_dir"])
def test_onnx_reader_gives_torch_logits_and_answers(
    model_fixture: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    folder: Path = request.getfixturevalue(model_fixture)
    settings = {"max_seq_length": 128, "stride": 32, "batch_size": 4}
    on_onnx = ExtractiveReader(
        model=str(folder), backend="onnx", cache_dir=tmp_path, precision="fp32", **settings
    )
    on_torch = ExtractiveReader(model=str(folder), backend="torch", **settings)
    on_onnx.warm_up()
    on_torch.warm_up()
    assert isinstance(on_onnx._model, OnnxSpanModel)
    assert not isinstance(on_torch._model, OnnxSpanModel)
    windows = make_windows(on_torch.tokenizer, QUESTION, PASSAGES, max_seq_length=128, stride=32)
    assert len(windows) > len(PASSAGES)  # the long passage spans several windows
    for (s1, e1), (s2, e2) in zip(
        run_windows(on_onnx._model, on_onnx.tokenizer, windows, batch_size=4),
        run_windows(on_torch._model, on_torch.tokenizer, windows, batch_size=4),
        strict=True,
    ):
        assert s1.shape == s2.shape and np.abs(s1 - s2).max() < 1e-4 and np.abs(e1 - e2).max() < 1e-4
    a, b = on_onnx.run(QUESTION, PASSAGES), on_torch.run(QUESTION, PASSAGES)
    assert [(s.passage_index, s.char_start, s.char_end) for s in a.spans] == [
        (s.passage_index, s.char_start, s.char_end) for s in b.spans
    ]
    assert a.windows == b.windows and abs(a.null_score - b.null_score) < 1e-3


def test_export_is_cached_and_redone_when_the_weights_change(tiny_qa_bert_dir: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(tiny_qa_bert_dir, model)
    cache = tmp_path / "cache"
    ExtractiveReader(model=str(model), cache_dir=cache).warm_up()
    first = sorted(cache.glob("*-reader-*.onnx"))
    assert sorted(p.name.endswith("-int8pc.onnx") for p in first) == [False, True]  # export, int8 copy
    ExtractiveReader(model=str(model), cache_dir=cache).warm_up()
    assert sorted(cache.glob("*-reader-*.onnx")) == first
    config = json.loads((model / "config.json").read_text())
    config["layer_norm_eps"] = 1e-6
    (model / "config.json").write_text(json.dumps(config))
    ExtractiveReader(model=str(model), cache_dir=cache).warm_up()
    assert len(list(cache.glob("*-reader-*.onnx"))) == 4


def test_auto_falls_back_to_torch_and_onnx_says_why_not(tiny_qa_bert_dir: Path, tmp_path: Path) -> None:
    without_cache = ExtractiveReader(model=str(tiny_qa_bert_dir))
    without_cache.warm_up()
    assert not isinstance(without_cache._model, OnnxSpanModel)
    with pytest.raises(ReaderLoadError, match="no cache_dir"):
        ExtractiveReader(model=str(tiny_qa_bert_dir), backend="onnx").warm_up()
    with pytest.raises(ReaderLoadError, match="not a local model folder"):
        ExtractiveReader(model="some-org/not-downloaded", backend="onnx", cache_dir=tmp_path).warm_up()
    with pytest.raises(ValueError, match="reader backend"):
        ExtractiveReader(model=str(tiny_qa_bert_dir), backend="tensorrt")


def test_a_failed_export_falls_back_to_torch_under_auto(
    tiny_qa_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import spanqa.reader.onnx_model as onnx_module

    def broken_export(folder: Path, destination: Path) -> Path:
        raise onnx_module.OnnxExportMismatch("differs from torch by 3 logits")

    monkeypatch.setattr(onnx_module, "export_span_model", broken_export)
    auto = ExtractiveReader(model=str(tiny_qa_bert_dir), cache_dir=tmp_path)
    assert auto.run(QUESTION, PASSAGES[:1]).windows == 1
    assert not isinstance(auto._model, OnnxSpanModel)
    with pytest.raises(ReaderLoadError, match="differs from torch"):
        ExtractiveReader(model=str(tiny_qa_bert_dir), backend="onnx", cache_dir=tmp_path).warm_up()


def test_int8_reader_is_a_quantized_export_with_valid_spans(tiny_qa_bert_dir: Path, tmp_path: Path) -> None:
    fp32 = ExtractiveReader(model=str(tiny_qa_bert_dir), cache_dir=tmp_path, precision="fp32")
    int8 = ExtractiveReader(model=str(tiny_qa_bert_dir), cache_dir=tmp_path, precision="int8")
    a, b = fp32.run(QUESTION, PASSAGES), int8.run(QUESTION, PASSAGES)
    assert len(list(tmp_path.glob("*-reader-*-int8pc.onnx"))) == 1
    assert (fp32.loaded_precision, int8.loaded_precision) == ("fp32", "int8")
    assert a.windows == b.windows and b.spans
    for span in b.spans:
        passage = PASSAGES[span.passage_index]
        assert 0 <= span.char_start < span.char_end <= len(passage)
        assert passage[span.char_start : span.char_end].strip() == passage[span.char_start : span.char_end]
    windows = make_windows(fp32.tokenizer, QUESTION, PASSAGES)
    (s1, _), (s2, _) = (
        run_windows(fp32._model, fp32.tokenizer, windows)[0],
        run_windows(int8._model, int8.tokenizer, windows)[0],
    )
    # Quantized, not a copy: close to the fp32 logits but not equal to them.
    assert 0 < np.abs(s1 - s2).max() < 0.5 * (np.abs(s1).max() + 1)


def test_auto_precision_is_int8_on_onnx_runtime_and_fp32_on_torch(
    tiny_qa_bert_dir: Path, tmp_path: Path
) -> None:
    on_onnx = ExtractiveReader(model=str(tiny_qa_bert_dir), cache_dir=tmp_path)
    on_torch = ExtractiveReader(model=str(tiny_qa_bert_dir), cache_dir=tmp_path, backend="torch")
    no_cache = ExtractiveReader(model=str(tiny_qa_bert_dir))
    for reader in (on_onnx, on_torch, no_cache):
        assert reader.precision == "auto"
        assert reader.run(QUESTION, PASSAGES[:1]).windows == 1
    assert isinstance(on_onnx._model, OnnxSpanModel) and on_onnx.loaded_precision == "int8"
    # auto never fails for want of ONNX Runtime: it reads in fp32 on torch instead.
    assert not isinstance(on_torch._model, OnnxSpanModel) and on_torch.loaded_precision == "fp32"
    assert not isinstance(no_cache._model, OnnxSpanModel) and no_cache.loaded_precision == "fp32"


def test_int8_needs_onnx_runtime_and_says_so(tiny_qa_bert_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ReaderLoadError, match=r"reader_precision 'int8' needs ONNX Runtime.*'torch'"):
        ExtractiveReader(
            model=str(tiny_qa_bert_dir), backend="torch", cache_dir=tmp_path, precision="int8"
        ).warm_up()
    with pytest.raises(ValueError, match="reader precision"):
        ExtractiveReader(model=str(tiny_qa_bert_dir), precision="fp8")
