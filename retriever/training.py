"""Training and evaluating the bi-encoder for "question -> the passage that answers it".

The Sentence-BERT objectives come from sentence-transformers, as does the training loop (its trainer:
checkpoints, resume, schedules, progress); this module only turns SQuAD-format data into pairs, mines hard
negatives with BM25 (bm25s) and wires the pieces. Mean pooling and L2 normalization are kept, so a trained
model drops into the index like the one it started from.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spanqa.errors import SpanqaError
from spanqa.retriever.encoder import resolve_encoder_model

logger = logging.getLogger(__name__)

LOSSES = ("mnr", "triplet", "cosine", "softmax", "distill")
RECALL_AT = (1, 5, 10, 20)
CONFIG_FILE = "retriever_train_config.json"
FINAL_DIR = "final"


class RetrieverTrainError(SpanqaError):
    """A retriever training or evaluation run cannot start (bad data, a loss without what it needs)."""


@dataclass(frozen=True)
class RetrieverTrainConfig:
    """One training run; saved in ``out_dir`` so that ``resume`` needs only the folder.

    Attributes:
        loss: "mnr" (multiple-negatives ranking: in-batch negatives plus the mined ones), "triplet" (a
            margin between the positive and a mined negative), "cosine" (regression of the cosine to 1 for
            pairs, 0 for negatives), "softmax" (classification over (u, v, |u - v|)) or "distill" (the mean
            squared error to the embeddings ``init`` gives every question and paragraph: with
            ``keep_layers``, a smaller model learns to embed as the whole one does).
        keep_layers: keep only these transformer layers of ``init`` (0-based), e.g. (0, 2, 4): a shallower
            and faster encoder of the same width; None keeps them all.
        hard_negatives: BM25-mined paragraphs per question that hold no gold answer.
        limit: train on a seeded sample of N questions (a CPU-sized subset); None: all.
        time_limit_minutes: stop (with a checkpoint) after this long; ``resume`` goes on.
    """

    train_file: str
    init: str
    out_dir: str
    loss: str = "mnr"
    epochs: float = 1.0
    batch_size: int = 32
    lr: float = 2e-5
    warmup: float = 0.1
    max_seq_length: int = 256
    hard_negatives: int = 1
    limit: int | None = None
    max_steps: int | None = None
    save_every: int = 500
    eval_file: str | None = None
    eval_limit: int = 1000
    seed: int = 42
    device: str = "auto"
    time_limit_minutes: float | None = None
    keep_layers: tuple[int, ...] | None = None


@dataclass(frozen=True)
class SquadRetrievalData:
    """Questions and paragraphs of a SQuAD-format file: each question's paragraph, and its answers."""

    questions: list[str]
    answers: list[list[str]]
    paragraph_of: list[int]
    paragraphs: list[str]


def load_retrieval_data(path: str | Path, *, limit: int | None = None, seed: int = 42) -> SquadRetrievalData:
    """Read SQuAD v1.1/v2.0 JSON: its answerable questions (``limit``: a seeded sample of N), every paragraph.

    Raises:
        RetrieverTrainError: the file is not SQuAD-format JSON or holds no answerable question.
    """
    try:
        articles = json.loads(Path(path).read_text(encoding="utf-8"))["data"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RetrieverTrainError(f"{path} is not SQuAD-format JSON: {exc}") from exc
    questions: list[str] = []
    answers: list[list[str]] = []
    paragraph_of: list[int] = []
    paragraphs: list[str] = []
    for article in articles:
        for paragraph in article.get("paragraphs", []):
            paragraphs.append(paragraph["context"])
            for qa in paragraph.get("qas", []):
                texts = [a["text"] for a in qa.get("answers", []) if a.get("text")]
                if qa.get("is_impossible") or not texts:
                    continue
                questions.append(qa["question"].strip())
                answers.append(texts)
                paragraph_of.append(len(paragraphs) - 1)
    if not questions:
        raise RetrieverTrainError(f"{path} holds no answerable question")
    if limit is not None and limit < len(questions):
        # A seeded sample across all articles (the first N would be a few articles' worth); every paragraph
        # stays in the corpus, where hard negatives are mined.
        kept = sorted(random.Random(seed).sample(range(len(questions)), limit))
        questions, answers = [questions[i] for i in kept], [answers[i] for i in kept]
        paragraph_of = [paragraph_of[i] for i in kept]
    return SquadRetrievalData(questions, answers, paragraph_of, paragraphs)


def _normalized(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def mine_hard_negatives(data: SquadRetrievalData, per_question: int, *, depth: int = 30) -> list[list[int]]:
    """Per question, the best BM25 paragraphs (at most ``per_question``) that hold none of its answers.

    A paragraph that holds a gold answer's words is not a negative even when it is not the gold paragraph
    (SQuAD repeats facts across paragraphs): training it away would teach the retriever to miss answers.
    """
    if per_question <= 0:
        return [[] for _ in data.questions]
    import bm25s

    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(data.paragraphs, stopwords="en", show_progress=False), show_progress=False)
    k = min(depth, len(data.paragraphs))
    found, _ = retriever.retrieve(
        bm25s.tokenize(data.questions, stopwords="en", show_progress=False), k=k, show_progress=False
    )
    normalized = [_normalized(p) for p in data.paragraphs]
    negatives: list[list[int]] = []
    for row, gold, answers in zip(found, data.paragraph_of, data.answers, strict=True):
        wanted = [_normalized(a) for a in answers]
        picked = [
            int(i) for i in row if int(i) != gold and not any(w and w in normalized[int(i)] for w in wanted)
        ][:per_question]
        negatives.append(picked)
    return negatives


def training_columns(config: RetrieverTrainConfig, data: SquadRetrievalData) -> dict[str, list[Any]]:
    """The training dataset's columns for ``config.loss`` (the column order is what the loss reads)."""
    if config.loss not in LOSSES:
        raise RetrieverTrainError(f"unknown loss {config.loss!r}: one of {', '.join(LOSSES)}")
    if config.loss == "distill":
        raise RetrieverTrainError("the distill loss's columns need the teacher: use distillation_columns")
    needs_negative = config.loss in ("triplet", "cosine", "softmax")
    wanted = max(config.hard_negatives, 1 if needs_negative else 0)
    negatives = mine_hard_negatives(data, wanted)
    rng = random.Random(config.seed)
    questions, positives = data.questions, [data.paragraphs[i] for i in data.paragraph_of]
    if config.loss == "mnr":
        rows = [i for i, found in enumerate(negatives) if len(found) >= wanted]
        columns: dict[str, list[Any]] = {
            "anchor": [questions[i] for i in rows],
            "positive": [positives[i] for i in rows],
        }
        for n in range(wanted):
            columns[f"negative_{n + 1}"] = [data.paragraphs[negatives[i][n]] for i in rows]
        return columns
    rows = [i for i, found in enumerate(negatives) if found]
    if config.loss == "triplet":
        return {
            "anchor": [questions[i] for i in rows],
            "positive": [positives[i] for i in rows],
            "negative": [data.paragraphs[negatives[i][0]] for i in rows],
        }
    # Pair losses: each question once with its paragraph (1) and once with a mined negative (0), shuffled.
    pairs = [(questions[i], positives[i], 1) for i in rows] + [
        (questions[i], data.paragraphs[negatives[i][0]], 0) for i in rows
    ]
    rng.shuffle(pairs)
    first, second, labels = (list(column) for column in zip(*pairs, strict=True))
    if config.loss == "cosine":
        return {"sentence1": first, "sentence2": second, "score": [float(label) for label in labels]}
    return {"sentence1": first, "sentence2": second, "label": labels}


def distillation_columns(
    teacher: Any, data: SquadRetrievalData, *, batch_size: int = 128
) -> dict[str, list[Any]]:
    """Every distinct question and paragraph of ``data`` with ``teacher``'s embedding of it as its label
    (the columns sentence-transformers' MSELoss reads)."""
    texts = list(dict.fromkeys([*data.questions, *data.paragraphs]))
    vectors = teacher.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
    return {"sentence": texts, "label": [vector.tolist() for vector in vectors]}


def keep_layers(encoder: Any, layers: Sequence[int]) -> list[int]:
    """Cut ``encoder`` (a BERT-like transformers model) down to the given transformer layers, in place; its
    config says so, so the saved model loads with that many layers.

    Returns:
        The layers kept, in order.

    Raises:
        RetrieverTrainError: a layer it does not have, or none at all.
    """
    import torch

    blocks = encoder.encoder.layer
    wanted = sorted(set(layers))
    if not wanted or wanted[0] < 0 or wanted[-1] >= len(blocks):
        raise RetrieverTrainError(
            f"cannot keep layers {list(layers)}: the model has layers 0 to {len(blocks) - 1}"
        )
    encoder.encoder.layer = torch.nn.ModuleList([blocks[i] for i in wanted])
    encoder.config.num_hidden_layers = len(wanted)
    return wanted


def _device(name: str) -> str:
    if name != "auto":
        return name
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_bi_encoder(name_or_path: str, *, device: str = "cpu", max_seq_length: int | None = None) -> Any:
    """A SentenceTransformer that pools by mean (a plain HF model gets mean pooling) and normalizes, with
    float32 weights whatever precision they were saved in (a float16 copy travels to a GPU)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize

    model = SentenceTransformer(
        resolve_encoder_model(name_or_path), device=device, model_kwargs={"dtype": torch.float32}
    )
    if not any(isinstance(module, Normalize) for module in model):
        model.append(Normalize())
    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
    return model


def _loss(name: str, model: Any) -> Any:
    from sentence_transformers.sentence_transformer import losses

    if name == "mnr":
        return losses.MultipleNegativesRankingLoss(model)
    if name == "triplet":
        return losses.TripletLoss(
            model, distance_metric=losses.TripletDistanceMetric.COSINE, triplet_margin=0.3
        )
    if name == "cosine":
        return losses.CosineSimilarityLoss(model)
    if name == "distill":
        return losses.MSELoss(model)
    return losses.SoftmaxLoss(model, model.get_sentence_embedding_dimension(), num_labels=2)


def ir_evaluator(data: SquadRetrievalData, *, name: str = "squad", limit: int | None = None) -> Any:
    """sentence-transformers' InformationRetrievalEvaluator: the corpus is every paragraph of ``data``,
    the queries its questions (``limit``: a seeded sample of them)."""
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator

    indices = list(range(len(data.questions)))
    if limit is not None and limit < len(indices):
        indices = sorted(random.Random(13).sample(indices, limit))
    return InformationRetrievalEvaluator(
        queries={str(i): data.questions[i] for i in indices},
        corpus={str(p): text for p, text in enumerate(data.paragraphs)},
        relevant_docs={str(i): {str(data.paragraph_of[i])} for i in indices},
        accuracy_at_k=list(RECALL_AT),
        precision_recall_at_k=list(RECALL_AT),
        mrr_at_k=[10],
        ndcg_at_k=[10],
        map_at_k=[100],
        name=name,
        write_csv=False,
        batch_size=64,
    )


def evaluate_retriever(
    model_name: str, data_file: str | Path, *, limit: int | None = None, device: str = "auto"
) -> dict[str, Any]:
    """Recall@1/5/10/20 and MRR@10 of a bi-encoder over a SQuAD-format file (corpus: all its paragraphs).

    Each question has one relevant paragraph, so recall@k is the share of questions whose paragraph is in
    the first k.

    Returns:
        ``{"model", "data", "questions", "paragraphs", "recall": {"@1": ...}, "mrr@10": ...}``.
    """
    data = load_retrieval_data(data_file)
    model = load_bi_encoder(model_name, device=_device(device))
    evaluator = ir_evaluator(data, name="eval", limit=limit)
    scores = evaluator(model)
    prefix = _prefix(scores)
    return {
        "model": model_name,
        "data": str(data_file),
        "questions": len(evaluator.queries),
        "paragraphs": len(data.paragraphs),
        "recall": {f"@{k}": round(float(scores[f"{prefix}accuracy@{k}"]), 4) for k in RECALL_AT},
        "mrr@10": round(float(scores[f"{prefix}mrr@10"]), 4),
    }


def _prefix(scores: dict[str, Any]) -> str:
    """The common key prefix of an evaluator's metrics, e.g. ``eval_cosine_`` before ``accuracy@1``."""
    key = next(k for k in scores if k.endswith("accuracy@1"))
    return key[: -len("accuracy@1")]


@dataclass(frozen=True)
class RetrieverTrainResult:
    """Where the model went, how far the run got, and the training loss as logged."""

    final: Path
    global_step: int
    max_steps: int
    losses: list[float]
    evaluations: list[dict[str, float]]


def train_retriever(config: RetrieverTrainConfig, *, resume: bool = False) -> RetrieverTrainResult:
    """Train a bi-encoder as ``config`` says; the model is saved in ``out_dir/final``.

    Checkpoints go to ``out_dir/checkpoints`` every ``save_every`` steps (and when the time limit stops
    the run); ``resume`` continues from the newest one with the saved config.

    Returns:
        The final model's folder (a SentenceTransformer: loadable by spanqa's encoders) and the run's log.
    """
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.training_args import BatchSamplers
    from transformers import TrainerCallback

    out = Path(config.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG_FILE).write_text(json.dumps(dataclasses.asdict(config), indent=2) + "\n")
    device = _device(config.device)
    data = load_retrieval_data(config.train_file, limit=config.limit, seed=config.seed)
    model = load_bi_encoder(config.init, device=device, max_seq_length=config.max_seq_length)
    if config.loss == "distill":  # the teacher is the whole model, before any layer is cut
        columns = distillation_columns(model, data, batch_size=max(config.batch_size, 32))
    else:
        columns = training_columns(config, data)
    if config.keep_layers is not None:
        keep_layers(model[0].auto_model, config.keep_layers)
    rows = len(next(iter(columns.values())))
    logger.info("%d training rows (%s loss) from %d questions", rows, config.loss, len(data.questions))
    evaluator = None
    if config.eval_file:
        evaluator = ir_evaluator(load_retrieval_data(config.eval_file), name="eval", limit=config.eval_limit)

    started = time.monotonic()

    class TimeLimit(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            limit = config.time_limit_minutes
            if limit is not None and time.monotonic() - started > limit * 60:
                control.should_training_stop = True
                control.should_save = True
            return control

    arguments = SentenceTransformerTrainingArguments(
        output_dir=str(out / "checkpoints"),
        num_train_epochs=config.epochs,
        max_steps=config.max_steps if config.max_steps is not None else -1,
        per_device_train_batch_size=config.batch_size,
        learning_rate=config.lr,
        warmup_steps=config.warmup if config.warmup < 1 else int(config.warmup),  # a float: a share of steps
        save_strategy="steps",
        save_steps=config.save_every,
        save_total_limit=2,
        eval_strategy="steps" if evaluator is not None else "no",
        eval_steps=config.save_every if evaluator is not None else None,
        logging_steps=max(1, min(50, config.save_every)),
        seed=config.seed,
        use_cpu=device == "cpu",
        fp16=device.startswith("cuda"),
        batch_sampler=BatchSamplers.NO_DUPLICATES if config.loss == "mnr" else BatchSamplers.BATCH_SAMPLER,
        report_to="none",
        dataloader_num_workers=0,
    )
    trainer = SentenceTransformerTrainer(
        model=model,
        args=arguments,
        train_dataset=Dataset.from_dict(columns),
        loss=_loss(config.loss, model),
        evaluator=evaluator,
        callbacks=[TimeLimit()],
    )
    checkpoints = sorted((out / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    trainer.train(resume_from_checkpoint=str(checkpoints[-1]) if resume and checkpoints else None)
    final = out / FINAL_DIR
    model.save(str(final))
    history = trainer.state.log_history
    return RetrieverTrainResult(
        final=final,
        global_step=trainer.state.global_step,
        max_steps=trainer.state.max_steps,
        losses=[float(entry["loss"]) for entry in history if "loss" in entry],
        evaluations=[
            {k: float(v) for k, v in entry.items() if k.startswith("eval_") and isinstance(v, (int, float))}
            for entry in history
            if any(k.endswith("accuracy@1") for k in entry)
        ],
    )


def load_config(out_dir: str | Path) -> RetrieverTrainConfig:
    """The config a run saved in ``out_dir`` (for ``--resume``).

    Raises:
        RetrieverTrainError: no run was started there.
    """
    path = Path(out_dir) / CONFIG_FILE
    if not path.is_file():
        raise RetrieverTrainError(f"nothing to resume in {out_dir}: no {CONFIG_FILE}")
    known = {f.name for f in dataclasses.fields(RetrieverTrainConfig)}
    saved = {k: v for k, v in json.loads(path.read_text()).items() if k in known}
    if saved.get("keep_layers") is not None:  # JSON gave it back as a list
        saved["keep_layers"] = tuple(saved["keep_layers"])
    return RetrieverTrainConfig(**saved)


def config_with(base: RetrieverTrainConfig, **changes: Any) -> RetrieverTrainConfig:
    """``base`` with the given fields changed (None values ignored)."""
    return dataclasses.replace(base, **{k: v for k, v in changes.items() if v is not None})


__all__: Sequence[str] = (
    "LOSSES",
    "RetrieverTrainConfig",
    "RetrieverTrainError",
    "RetrieverTrainResult",
    "distillation_columns",
    "evaluate_retriever",
    "keep_layers",
    "load_retrieval_data",
    "mine_hard_negatives",
    "train_retriever",
)
