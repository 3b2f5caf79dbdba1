"""Fine-tuning an encoder for span extraction on SQuAD-format data (v1.1 and v2.0).

What makes this affordable on a CPU: dynamic padding with length-grouped batches, and resumable
stretches (a checkpoint every N steps; ``resume`` carries on from the exact batch it stopped at).
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import shutil
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from spanqa.errors import SpanqaError
from spanqa.reader.squad import SquadExample, load_squad
from spanqa.text import sentence_spans

logger = logging.getLogger(__name__)

CHECKPOINT_DIR = "checkpoint"
BEST_DIR = "best"
STATE_FILE = "training_state.pt"
HISTORY_FILE = "history.jsonl"


class NoCheckpointError(SpanqaError):
    """``resume`` was asked for, but the run's folder holds no checkpoint."""


@dataclass
class TrainConfig:
    """Settings of one training run; saved with every checkpoint so ``resume`` needs only ``out_dir``."""

    #: SQuAD-format files, read in this order (one path, as checkpoints of older runs hold, or several
    #: joined by os.pathsep: a reader is trained on SQuAD and on documentation questions at once).
    train_file: str
    init: str
    out_dir: str
    epochs: float = 2.0
    max_seq_length: int = 256
    stride: int = 96
    max_question_tokens: int = 64
    batch_size: int = 32
    lr: float = 1e-4
    warmup: float = 0.05
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    max_steps: int | None = None
    save_every: int = 200
    eval_file: str | None = None
    eval_limit: int = 600
    negatives: float = 0.2
    cut_negatives: float = 0.0
    exclude_ids_file: str | None = None
    seed: int = 42
    pool_batches: int = 50
    threads: int = 0
    time_limit_minutes: float | None = None
    device: str = "auto"


# Checkpoints written before these fields were renamed still resume.
_RENAMED_FIELDS = {"max_seq_len": "max_seq_length"}


@dataclass
class TrainResult:
    global_step: int
    total_steps: int
    windows_seen: int
    finished: bool
    last_loss: float
    history: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Features:
    input_ids: list[list[int]]
    token_type_ids: list[list[int]] | None
    start_positions: list[int]
    end_positions: list[int]

    def __len__(self) -> int:
        return len(self.input_ids)


def add_unanswerable_pairs(
    examples: Sequence[SquadExample], ratio: float, seed: int, *, cut_share: float = 0.0
) -> list[SquadExample]:
    """Teach abstention without SQuAD 2.0 train data: pair questions with paragraphs that lack their answer.

    A share ``cut_share`` of the new pairs keep the question's own paragraph with the sentences that hold its
    answers cut out (hardest: the same words and topic, a plausible span left, as in SQuAD 2.0); of the
    others, half take another paragraph of the same article (hard: same topic), half a paragraph of another
    article. A text that contains any gold answer text is never used.

    Args:
        examples: answerable training examples.
        ratio: new unanswerable pairs per example (0.25 adds one for every four questions).
        seed: random seed.
        cut_share: the share of new pairs made by cutting the answer's sentences out of the paragraph.

    Returns:
        The new unanswerable examples.
    """
    if ratio <= 0:
        return []
    rng = random.Random(seed)
    paragraphs: dict[int, list[str]] = {}
    for ex in examples:
        contexts = paragraphs.setdefault(ex.article_index, [])
        if not contexts or contexts[-1] != ex.context:
            contexts.append(ex.context)
    articles = sorted(paragraphs)
    out: list[SquadExample] = []
    for ex in examples:
        if rng.random() >= ratio:
            continue
        if cut_share > 0 and rng.random() < cut_share:
            cut = without_answer_sentences(ex)
            if cut is not None:
                out.append(_unanswerable(ex, cut, ex.article_index))
                continue
        answers = [a.text.lower() for a in ex.answers if a.text.strip()]
        for _ in range(10):
            same_article = rng.random() < 0.5 and len(paragraphs[ex.article_index]) > 1
            article = ex.article_index if same_article else rng.choice(articles)
            context = rng.choice(paragraphs[article])
            lowered = context.lower()
            if context != ex.context and not any(a in lowered for a in answers):
                out.append(_unanswerable(ex, context, article))
                break
    return out


def _unanswerable(example: SquadExample, context: str, article: int) -> SquadExample:
    """``example``'s question asked of ``context``, a text of ``article`` that lacks its answer."""
    return SquadExample(
        id=f"{example.id}-unanswerable",
        title=example.title,
        context=context,
        question=example.question,
        is_impossible=True,
        article_index=article,
    )


def without_answer_sentences(example: SquadExample, min_sentences: int = 2) -> str | None:
    """``example``'s paragraph with every sentence that overlaps a gold answer cut out, or None when fewer
    than ``min_sentences`` sentences are left or a gold answer's text still occurs in what is left."""
    golds = [a for a in example.answers if a.text.strip()]
    spans = sentence_spans(example.context)
    kept = [(s, e) for s, e in spans if not any(s < a.start + len(a.text) and a.start < e for a in golds)]
    if len(kept) < min_sentences or len(kept) == len(spans):
        return None
    text = " ".join(example.context[s:e] for s, e in kept)
    lowered = text.lower()
    return None if any(a.text.lower() in lowered for a in golds) else text


def featurize(
    tokenizer: Any,
    examples: Sequence[SquadExample],
    *,
    max_seq_length: int,
    stride: int,
    max_question_tokens: int,
    chunk: int = 2000,
) -> Features:
    """Tokenize examples into training windows with start/end token targets (CLS when no answer is inside)."""
    input_ids: list[list[int]] = []
    token_type_ids: list[list[int]] = []
    starts: list[int] = []
    ends: list[int] = []
    has_types = False
    for offset in range(0, len(examples), chunk):
        batch = examples[offset : offset + chunk]
        questions = _truncate_questions(tokenizer, [ex.question.strip() for ex in batch], max_question_tokens)
        encoded = tokenizer(
            questions,
            [ex.context for ex in batch],
            truncation="only_second",
            max_length=max_seq_length,
            stride=stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            padding=False,
        )
        has_types = "token_type_ids" in encoded
        for w, ids in enumerate(encoded["input_ids"]):
            ex = batch[encoded["overflow_to_sample_mapping"][w]]
            seq_ids = encoded.sequence_ids(w)
            offsets = encoded["offset_mapping"][w]
            cls_index = ids.index(tokenizer.cls_token_id) if tokenizer.cls_token_id in ids else 0
            start_tok = end_tok = cls_index
            if ex.answers and not ex.is_impossible:
                answer = ex.answers[0]
                a_start, a_end = answer.start, answer.start + len(answer.text)
                context_tokens = [i for i, s in enumerate(seq_ids) if s == 1]
                first, last = context_tokens[0], context_tokens[-1]
                if offsets[first][0] <= a_start and offsets[last][1] >= a_end:
                    i = first
                    while i <= last and offsets[i][0] <= a_start:
                        i += 1
                    start_tok = i - 1
                    j = last
                    while j >= first and offsets[j][1] >= a_end:
                        j -= 1
                    end_tok = j + 1
            input_ids.append(ids)
            if has_types:
                token_type_ids.append(encoded["token_type_ids"][w])
            starts.append(start_tok)
            ends.append(end_tok)
    return Features(input_ids, token_type_ids if has_types else None, starts, ends)


def _truncate_questions(tokenizer: Any, questions: list[str], max_tokens: int) -> list[str]:
    encoded = tokenizer(questions, add_special_tokens=False, return_offsets_mapping=True)
    out = []
    for question, offsets in zip(questions, encoded["offset_mapping"], strict=True):
        out.append(question if len(offsets) <= max_tokens else question[: offsets[max_tokens - 1][1]])
    return out


def length_grouped_batches(
    lengths: Sequence[int], batch_size: int, pool_batches: int, seed: int
) -> list[list[int]]:
    """Shuffle; sort pools of ``pool_batches`` batches by length; cut into batches; shuffle the batches.

    Deterministic for a given seed, so a resumed run sees the same order.
    """
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    rng.shuffle(order)
    pool = batch_size * max(1, pool_batches)
    batches: list[list[int]] = []
    for p in range(0, len(order), pool):
        members = sorted(order[p : p + pool], key=lambda i: lengths[i], reverse=True)
        batches.extend(members[b : b + batch_size] for b in range(0, len(members), batch_size))
    rng.shuffle(batches)
    return batches


def train(
    config: TrainConfig,
    *,
    resume: bool = False,
    on_step: Callable[[int, int, float, float], None] | None = None,
) -> TrainResult:
    """Fine-tune ``config.init`` for span extraction; checkpoints go to ``config.out_dir``.

    Args:
        config: the run's settings (with ``resume`` the saved ones win, except stopping rules).
        resume: carry on from ``out_dir/checkpoint``.
        on_step: called after each step with (step, total_steps, loss, windows_per_s).

    Returns:
        Where the run stopped and the evaluation history.
    """
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    out_dir = Path(config.out_dir)
    checkpoint = out_dir / CHECKPOINT_DIR
    state: dict[str, Any] | None = None
    if resume:
        if not (checkpoint / STATE_FILE).is_file():
            raise NoCheckpointError(f"no checkpoint to resume in {checkpoint}: start without --resume")
        # map_location: a run started on a GPU can go on on a CPU, and the other way round.
        state = torch.load(checkpoint / STATE_FILE, weights_only=True, map_location="cpu")
        saved = TrainConfig(**{_RENAMED_FIELDS.get(k, k): v for k, v in state["config"].items()})
        saved.max_steps = config.max_steps or saved.max_steps
        saved.time_limit_minutes = config.time_limit_minutes
        saved.threads = config.threads or saved.threads
        saved.device = config.device
        saved.eval_file = config.eval_file or saved.eval_file
        config = saved
    out_dir.mkdir(parents=True, exist_ok=True)
    if config.threads:
        torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    device = resolve_training_device(config.device)
    # Weights stay float32; on a GPU the forward pass runs under bf16 autocast (CPU bf16 is slow here).
    on_gpu = device.type == "cuda"
    if on_gpu:
        torch.backends.cuda.matmul.allow_tf32 = True

    model_source = str(checkpoint) if state else config.init
    tokenizer = AutoTokenizer.from_pretrained(model_source)
    model = AutoModelForQuestionAnswering.from_pretrained(model_source, dtype=torch.float32)
    model.to(device)
    model.train()
    logger.info("training on %s", device)

    examples = [ex for path in config.train_file.split(os.pathsep) for ex in load_squad(path)]
    if config.exclude_ids_file:
        excluded = set(Path(config.exclude_ids_file).read_text(encoding="utf-8").split())
        examples = [ex for ex in examples if ex.id not in excluded]
    examples.extend(
        add_unanswerable_pairs(
            [e for e in examples if not e.is_impossible],
            config.negatives,
            config.seed,
            cut_share=config.cut_negatives,
        )
    )
    started = time.perf_counter()
    features = featurize(
        tokenizer,
        examples,
        max_seq_length=config.max_seq_length,
        stride=config.stride,
        max_question_tokens=config.max_question_tokens,
    )
    logger.info(
        "%d examples -> %d training windows in %.1fs",
        len(examples),
        len(features),
        time.perf_counter() - started,
    )
    lengths = [len(ids) for ids in features.input_ids]
    batches_per_epoch = math.ceil(len(features) / config.batch_size)
    total_steps = config.max_steps or max(1, int(batches_per_epoch * config.epochs))

    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight")
    groups = [
        {
            "params": [p for n, p in model.named_parameters() if not n.endswith(no_decay)],
            "weight_decay": config.weight_decay,
        },
        {"params": [p for n, p in model.named_parameters() if n.endswith(no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=config.lr)
    warmup_steps = int(config.warmup * total_steps) if config.warmup < 1 else int(config.warmup)

    def lr_factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / max(1, warmup_steps)
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    global_step = 0
    windows_seen = 0
    history: list[dict[str, Any]] = []
    best_f1 = -1.0
    train_seconds = 0.0
    if state:
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        global_step = state["global_step"]
        windows_seen = state["windows_seen"]
        best_f1 = state.get("best_f1", -1.0)
        train_seconds = state.get("train_seconds", 0.0)
        torch.set_rng_state(state["torch_rng"])
        history = _read_history(out_dir)
        logger.info("resumed at step %d of %d", global_step, total_steps)

    eval_examples = load_squad(config.eval_file)[: config.eval_limit] if config.eval_file else []
    stop_requested = False

    def request_stop(signum: int, frame: Any) -> None:
        nonlocal stop_requested
        stop_requested = True
        logger.warning("signal %d: saving a checkpoint at the end of this step", signum)

    previous_handlers = {s: signal.signal(s, request_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    run_started = time.perf_counter()
    last_loss = float("nan")

    def save(evaluate: bool) -> None:
        nonlocal best_f1
        record: dict[str, Any] = {
            "step": global_step,
            "windows": windows_seen,
            "epoch": round(global_step / batches_per_epoch, 4),
            "train_minutes": round((train_seconds + time.perf_counter() - run_started) / 60, 1),
            "loss": round(last_loss, 4),
        }
        if evaluate and eval_examples:
            model.eval()
            metrics = _evaluate_in_memory(model, tokenizer, eval_examples)
            model.train()
            record.update(
                {
                    "eval_questions": len(eval_examples),
                    "em": round(metrics["exact_match"], 2),
                    "f1": round(metrics["f1"], 2),
                }
            )
            if metrics["f1"] > best_f1:
                best_f1 = metrics["f1"]
                _save_model(model, tokenizer, out_dir / BEST_DIR)
                record["best"] = True
        _save_checkpoint(
            checkpoint,
            model,
            tokenizer,
            {
                "config": asdict(config),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "global_step": global_step,
                "windows_seen": windows_seen,
                "best_f1": best_f1,
                "train_seconds": train_seconds + time.perf_counter() - run_started,
                "torch_rng": torch.get_rng_state(),
            },
        )
        history.append(record)
        with (out_dir / HISTORY_FILE).open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        logger.info("checkpoint: %s", record)

    try:
        rate_started, rate_windows = time.perf_counter(), 0
        while global_step < total_steps and not stop_requested:
            epoch = global_step // batches_per_epoch
            batches = length_grouped_batches(
                lengths, config.batch_size, config.pool_batches, config.seed + epoch
            )
            for batch in batches[global_step - epoch * batches_per_epoch :]:
                inputs = _collate(features, batch, tokenizer.pad_token_id or 0)
                with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=on_gpu):
                    loss = model(**{name: t.to(device, non_blocking=True) for name, t in inputs.items()}).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                global_step += 1
                windows_seen += len(batch)
                rate_windows += len(batch)
                last_loss = float(loss.detach())
                rate = rate_windows / max(time.perf_counter() - rate_started, 1e-9)
                if on_step is not None:
                    on_step(global_step, total_steps, last_loss, rate)
                if global_step % 20 == 0:
                    logger.info(
                        "step %d/%d loss %.4f %.1f windows/s", global_step, total_steps, last_loss, rate
                    )
                out_of_time = (
                    config.time_limit_minutes is not None
                    and time.perf_counter() - run_started > config.time_limit_minutes * 60
                )
                if out_of_time:
                    stop_requested = True
                if global_step % config.save_every == 0 or global_step >= total_steps or stop_requested:
                    # A stretch that ran out of time is scored too: its last steps may be the best, and a
                    # run that stops before its first checkpoint still leaves a best model to export.
                    save(
                        evaluate=global_step % config.save_every == 0
                        or global_step >= total_steps
                        or out_of_time
                    )
                if global_step >= total_steps or stop_requested:
                    break
    finally:
        for sig, handler in previous_handlers.items():
            signal.signal(sig, handler)
    return TrainResult(
        global_step=global_step,
        total_steps=total_steps,
        windows_seen=windows_seen,
        finished=global_step >= total_steps,
        last_loss=last_loss,
        history=history,
    )


def resolve_training_device(name: str) -> Any:
    """The torch device for ``name``: "auto" takes the GPU when torch sees one.

    Raises:
        ValueError: a GPU was asked for and torch sees none.
    """
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"training device {name!r}: torch sees no CUDA GPU (use --device cpu or auto)")
    return device


def _collate(features: Features, batch: Sequence[int], pad_id: int) -> dict[str, Any]:
    import torch

    from spanqa.reader.model import pad_batch

    types = features.token_type_ids
    padded = pad_batch(
        [features.input_ids[i] for i in batch],
        [types[i] for i in batch] if types is not None else None,
        pad_id,
    )
    inputs = {name: torch.from_numpy(array) for name, array in padded.items()}
    inputs["start_positions"] = torch.tensor([features.start_positions[i] for i in batch])
    inputs["end_positions"] = torch.tensor([features.end_positions[i] for i in batch])
    return inputs


def _evaluate_in_memory(model: Any, tokenizer: Any, examples: Sequence[SquadExample]) -> dict[str, Any]:
    from spanqa.reader.evaluation import evaluate_reader
    from spanqa.reader.reader import ExtractiveReader

    reader = ExtractiveReader.from_loaded(model, tokenizer, batch_size=64)
    return evaluate_reader(reader, examples)


def _save_model(model: Any, tokenizer: Any, directory: Path) -> None:
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)


def _save_checkpoint(directory: Path, model: Any, tokenizer: Any, state: dict[str, Any]) -> None:
    """Write the whole checkpoint beside the old one, then swap: a kill never leaves half a checkpoint."""
    import torch

    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    torch.save(state, tmp / STATE_FILE)
    old = directory.with_name(directory.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if directory.exists():
        directory.rename(old)
    tmp.rename(directory)
    shutil.rmtree(old, ignore_errors=True)


def _read_history(out_dir: Path) -> list[dict[str, Any]]:
    path = out_dir / HISTORY_FILE
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


KEPT_ON_EXPORT = ("MODEL_CARD.md", "README.md", "LICENSE")


def export_model(source: str | Path, destination: str | Path, *, half: bool = True) -> Path:
    """Copy a trained reader for shipping: safetensors weights (fp16 halves the size) and tokenizer files."""
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    model = AutoModelForQuestionAnswering.from_pretrained(str(source), dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    if half:
        model = model.half()
    return _export(model, tokenizer, Path(destination))


def _export(model: Any, tokenizer: Any, destination: Path) -> Path:
    # A model card written by hand beside the weights outlives the weights it describes being replaced.
    cards = {
        name: (destination / name).read_bytes() for name in KEPT_ON_EXPORT if (destination / name).is_file()
    }
    _save_model(model, tokenizer, destination)
    for name, content in cards.items():
        (destination / name).write_bytes(content)
    return destination


def average_models(
    tuned: str | Path, base: str | Path, destination: str | Path, *, weight: float, half: bool = True
) -> Path:
    """Weights interpolated between a fine-tuned reader and the reader it started from, exported for shipping.

    ``weight * tuned + (1 - weight) * base`` for every tensor (Wortsman et al., 2022, "Robust fine-tuning of
    zero-shot models"): fine-tuning on documentation cost the reader SQuAD F1, and the interpolated weights
    keep most of the documentation gain while giving that back (docs/benchmarks.md). Both must be the same
    architecture; the tokenizer and config are ``tuned``'s.

    Args:
        tuned: the fine-tuned reader's folder.
        base: the reader it was fine-tuned from.
        destination: where the averaged reader is exported (model card files there are kept).
        weight: the share of ``tuned``, in [0, 1].
        half: save float16 weights (as ``export_model``).

    Returns:
        ``destination``.
    """
    from transformers import AutoTokenizer

    _check_weight(weight)
    model, tuned_state, base_state = _load_pair(tuned, base)
    _interpolate(model, tuned_state, base_state, weight)
    if half:
        model = model.half()
    return _export(model, AutoTokenizer.from_pretrained(str(tuned)), Path(destination))


@dataclass
class SoupScore:
    """A reader ``weight * tuned + (1 - weight) * base`` and its EM/F1 on each data set, never abstaining."""

    weight: float
    scores: dict[str, dict[str, float]]


def score_soups(
    tuned: str | Path,
    base: str | Path,
    weights: Sequence[float],
    data: Mapping[str, Sequence[SquadExample]],
    *,
    device: str = "auto",
) -> list[SoupScore]:
    """EM/F1 of the readers between a fine-tuned reader and its base, built in memory one weight at a time.

    What choosing an averaging weight needs (how much documentation is gained, how much SQuAD is kept) in
    one process: on a GPU it takes seconds per weight, so a device call can score its own run.

    Args:
        tuned: the fine-tuned reader's folder.
        base: the reader it was fine-tuned from (same architecture).
        weights: shares of ``tuned``, each in [0, 1].
        data: named SQuAD-format examples, each read with its gold paragraph and never abstaining (a pair
            without an answer scores 0, as in the training history's F1 over techqa dev pairs).
        device: "auto", "cpu" or "cuda".

    Returns:
        One ``SoupScore`` per weight, in the order given.
    """
    import torch
    from transformers import AutoTokenizer

    for weight in weights:
        _check_weight(weight)
    model, tuned_state, base_state = _load_pair(tuned, base)
    tokenizer = AutoTokenizer.from_pretrained(str(tuned))
    target = resolve_training_device(device)
    # Both readers' weights move to the device once; each weight's mix is then made there.
    model.to(target).eval()
    tuned_state = {name: tensor.to(target) for name, tensor in tuned_state.items()}
    base_state = {name: tensor.to(target) for name, tensor in base_state.items()}
    out: list[SoupScore] = []
    for weight in weights:
        _interpolate(model, tuned_state, base_state, weight)
        scores: dict[str, dict[str, float]] = {}
        with torch.no_grad():
            for name, examples in data.items():
                metrics = _evaluate_in_memory(model, tokenizer, examples)
                scores[name] = {key: round(float(metrics[key]), 2) for key in ("exact_match", "f1")}
        out.append(SoupScore(weight, scores))
    return out


def _check_weight(weight: float) -> None:
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be within [0, 1], not {weight}")


def _load_pair(tuned: str | Path, base: str | Path) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """``tuned`` loaded as float32, with copies of both readers' weights; a ValueError when the two are not
    the same architecture."""
    import torch
    from transformers import AutoModelForQuestionAnswering

    model = AutoModelForQuestionAnswering.from_pretrained(str(tuned), dtype=torch.float32)
    tuned_state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    base_state = AutoModelForQuestionAnswering.from_pretrained(str(base), dtype=torch.float32).state_dict()
    mismatched = sorted(
        name
        for name in tuned_state.keys() | base_state.keys()
        if name not in tuned_state
        or name not in base_state
        or tuned_state[name].shape != base_state[name].shape
    )
    if mismatched:
        raise ValueError(f"{tuned} and {base} are not the same architecture (they differ at {mismatched[0]})")
    return model, tuned_state, base_state


def _interpolate(model: Any, tuned: Mapping[str, Any], base: Mapping[str, Any], weight: float) -> None:
    """Set ``model``'s weights to ``weight * tuned + (1 - weight) * base`` (integer buffers stay tuned's)."""
    import torch

    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if tensor.is_floating_point():
                tensor.copy_(
                    tuned[name].to(tensor.device) * weight + base[name].to(tensor.device) * (1.0 - weight)
                )
