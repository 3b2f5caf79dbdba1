"""Shared fixtures: tiny random models built in code (once per session), settings in a temp dir."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

CORPUS = [
    "Super Bowl 50 was an American football game to determine the champion of the National Football League.",
    "The Denver Broncos defeated the Carolina Panthers 24 to 10 to earn their third Super Bowl title.",
    "The game was played on February 7, 2016, at Levi's Stadium in the San Francisco Bay Area.",
    "Warsaw is the capital and largest city of Poland. It stands on the Vistula River.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "Café, naïve, Zürich, Ελληνικά, русский, 東京, emoji 🙂 and other unicode text.",
    "Who what when where why how which is was were the a an of in on at to from by with and or.",
    "0 1 2 3 4 5 6 7 8 9 10 100 1000 2016 24 . , ; : ! ? ' \" ( ) - – —",
]


def _train_wordpiece(directory: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertTokenizerFast

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(
        vocab_size=400, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    )
    tokenizer.train_from_iterator(CORPUS * 5, trainer)
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    fast = BertTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=512,
    )
    fast.save_pretrained(directory)


def _train_bytelevel_bpe(directory: Path) -> None:
    from tokenizers import ByteLevelBPETokenizer, processors
    from transformers import RobertaTokenizerFast

    bpe = ByteLevelBPETokenizer(add_prefix_space=False, trim_offsets=True)
    bpe.train_from_iterator(
        CORPUS * 5, vocab_size=400, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    )
    bpe._tokenizer.post_processor = processors.RobertaProcessing(
        ("</s>", 2), ("<s>", 0), trim_offsets=True, add_prefix_space=False
    )
    fast = RobertaTokenizerFast(
        tokenizer_object=bpe._tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        cls_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
        model_max_length=512,
    )
    fast.save_pretrained(directory)


TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BERT encoder and WordPiece tokenizer, saved like a hub model."""
    import torch
    from transformers import BertConfig, BertModel

    directory = tmp_path_factory.mktemp("tiny-bert")
    _train_wordpiece(directory)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=400, max_position_embeddings=512, **TINY)
    BertModel(config).save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_qa_bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BERT span-extraction reader (WordPiece, token_type_ids)."""
    import torch
    from transformers import BertConfig, BertForQuestionAnswering

    directory = tmp_path_factory.mktemp("tiny-qa-bert")
    _train_wordpiece(directory)
    torch.manual_seed(1)
    config = BertConfig(vocab_size=400, max_position_embeddings=512, **TINY)
    BertForQuestionAnswering(config).save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_qa_roberta_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random RoBERTa span-extraction reader (byte-level BPE, no token_type_ids)."""
    import torch
    from transformers import RobertaConfig, RobertaForQuestionAnswering

    directory = tmp_path_factory.mktemp("tiny-qa-roberta")
    _train_bytelevel_bpe(directory)
    torch.manual_seed(2)
    config = RobertaConfig(
        vocab_size=400, max_position_embeddings=520, pad_token_id=1, bos_token_id=0, eos_token_id=2, **TINY
    )
    RobertaForQuestionAnswering(config).save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ONNX export cache for the whole session (exports are deterministic per model folder)."""
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture
def settings(tmp_path: Path, tiny_bert_dir: Path, tiny_qa_bert_dir: Path, model_cache: Path):  # type: ignore[no-untyped-def]
    """Settings for a fresh data directory with the tiny models and small chunks."""
    from spanqa.settings import Settings

    return Settings.load(
        environ={},
        data_dir=tmp_path / "data",
        model_cache_dir=model_cache,
        retriever_model=str(tiny_bert_dir),
        reader_model=str(tiny_qa_bert_dir),
        chunk_tokens=48,
        chunk_overlap=12,
    )


@pytest.fixture
def spanqa_env(settings) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """``settings`` as the SPANQA_* environment of a `spanqa` command (a CliRunner or a child process)."""
    return {
        "SPANQA_DATA_DIR": str(settings.data_dir),
        "SPANQA_RETRIEVER_MODEL": settings.retriever_model,
        "SPANQA_READER_MODEL": settings.reader_model,
        "SPANQA_CHUNK_TOKENS": str(settings.chunk_tokens),
        "SPANQA_CHUNK_OVERLAP": str(settings.chunk_overlap),
        "SPANQA_MODEL_CACHE_DIR": str(settings.model_cache),
        "SPANQA_CONFIG": "",
    }


# PostgreSQL ------------------------------------------------------------------------------------------------


def _postgres_url() -> str:
    url = os.environ.get("DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    for bare in ("postgresql://", "postgres://"):
        if url.startswith(bare):
            url = "postgresql+psycopg://" + url[len(bare) :]
    return url


#: The PostgreSQL server of the integration tests: ``DATABASE_URL``, else the one scripts/test.sh starts.
POSTGRES_URL = _postgres_url()


@pytest.fixture(scope="session")
def postgres() -> Iterator[Engine]:
    """An engine on the PostgreSQL server, or a skip when none answers."""
    engine = create_engine(POSTGRES_URL, poolclass=NullPool, connect_args={"connect_timeout": 3})
    try:
        with engine.connect():
            pass
    except SQLAlchemyError as exc:
        engine.dispose()
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        pytest.skip(
            f"no PostgreSQL at {make_url(POSTGRES_URL).render_as_string(hide_password=True)} ({reason}); "
            "set DATABASE_URL to run the PostgreSQL tests"
        )
    yield engine
    engine.dispose()


@pytest.fixture
def postgres_schema_url(postgres: Engine) -> Iterator[str]:
    """The URL of a fresh PostgreSQL schema (``search_path`` in the URL), dropped afterwards."""
    schema = f"t_{uuid.uuid4().hex[:16]}"
    with postgres.begin() as connection:
        connection.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    query = {"options": f"-csearch_path={schema}", "connect_timeout": "3"}
    yield make_url(POSTGRES_URL).update_query_dict(query).render_as_string(hide_password=False)
    with postgres.begin() as connection:
        connection.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
