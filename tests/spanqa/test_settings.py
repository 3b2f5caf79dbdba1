from __future__ import annotations

from pathlib import Path

import pytest

from spanqa.settings import Settings, SettingsError, setting_names


def test_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    s = Settings.load(environ={}, config_file=None)
    assert s.data_dir == tmp_path / ".spanqa" and not s.data_dir.exists()  # looking creates nothing
    assert s.retriever_model == "sentence-transformers/all-MiniLM-L6-v2"
    assert s.catalog_url.startswith("sqlite:///") and s.catalog_url.endswith("catalog.sqlite3")
    assert s.qdrant_path == tmp_path / ".spanqa" / "qdrant"
    assert s.model_cache == tmp_path / "cache" / "spanqa"  # one per user, shared by every data folder


def test_the_data_folder_is_found_like_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".spanqa").mkdir()
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    assert Settings.load(environ={}).data_dir == tmp_path / ".spanqa"
    assert Settings.load(environ={"SPANQA_DATA_DIR": str(deep / "own")}).data_dir == deep / "own"
    assert Settings.load(environ={}, data_dir=deep / "flag").data_dir == deep / "flag"


def test_renamed_settings_say_their_new_name() -> None:
    with pytest.raises(SettingsError, match="SPANQA_MAX_SEQ_LENGTH"):
        Settings.load(environ={"SPANQA_MAX_SEQ_LEN": "256"})
    with pytest.raises(SettingsError, match="doc_stride is now stride"):
        Settings.load(environ={}, doc_stride=64)


def test_precedence_file_then_env_then_overrides(tmp_path: Path) -> None:
    config = tmp_path / "spanqa.toml"
    config.write_text('chunk_tokens = 120\npassages = 7\nreader_model = "from-file"\n')
    env = {"SPANQA_PASSAGES": "9", "SPANQA_NO_ANSWER_THRESHOLD": "1.5", "OTHER": "x"}
    s = Settings.load(config_file=config, environ=env, reader_model="override")
    assert s.chunk_tokens == 120 and s.passages == 9 and s.no_answer_threshold == 1.5
    assert s.reader_model == "override"


def test_config_file_from_env_and_spanqa_table(tmp_path: Path) -> None:
    config = tmp_path / "custom.toml"
    config.write_text('[spanqa]\nanswers = 4\nqdrant_url = "http://q:6333"\n')
    s = Settings.load(environ={"SPANQA_CONFIG": str(config)})
    assert s.answers == 4 and s.qdrant_url == "http://q:6333"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SPANQA_CHUNK_TOKENS": "many"}, "chunk_tokens"),
        ({"SPANQA_RETRIEVER_WEIGHT": "x"}, "retriever_weight"),
        ({"SPANQA_READER_PRECISION": "fp8"}, "reader_precision='fp8' must be one of: auto, fp32, int8"),
        ({"SPANQA_READER_BACKEND": "cuda"}, "reader_backend"),
        ({"SPANQA_ENCODER_BACKEND": "ONNX "}, "encoder_backend"),
    ],
)
def test_bad_values_are_clear_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings.load(environ=env)


def test_unknown_keys_in_the_file_are_errors(tmp_path: Path) -> None:
    config = tmp_path / "spanqa.toml"
    config.write_text("chunk_tokenz = 3\n")
    with pytest.raises(SettingsError, match="chunk_tokenz"):
        Settings.load(config_file=config, environ={})
    config.write_text("not toml [")
    with pytest.raises(SettingsError, match="cannot read"):
        Settings.load(config_file=config, environ={})


def test_secrets_are_masked_and_optional_values_parse() -> None:
    s = Settings.load(environ={"SPANQA_QDRANT_API_KEY": "s3cret", "SPANQA_DATABASE_URL": ""})
    assert s.public_dict()["qdrant_api_key"] == "***"
    assert "s3cret" not in repr(s.public_dict())
    assert s.database_url is None
    assert "qdrant_api_key" in setting_names()


def test_choice_settings_accept_their_words() -> None:
    s = Settings.load(environ={"SPANQA_READER_PRECISION": " int8", "SPANQA_READER_BACKEND": "onnx"})
    assert (s.reader_precision, s.reader_backend, s.encoder_backend) == ("int8", "onnx", "auto")
