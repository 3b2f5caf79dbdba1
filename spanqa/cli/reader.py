"""``spanqa reader``: train, export and evaluate span-extraction readers."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

import click

from reader.training import TrainConfig
from spanqa.cli._errors import friendly_errors, settings_from
from spanqa.cli._options import json_option
from spanqa.cli._output import console, print_json, progress_bar
from spanqa.errors import first_line
from spanqa.settings import DEFAULT_RETRIEVER_MODEL

# The options' defaults are TrainConfig's: one owner for each.
TRAIN_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(TrainConfig)}


@click.group("reader")
def reader_group() -> None:
    """Train and evaluate span-extraction readers."""


@reader_group.command("train")
@click.option(
    "--train",
    "train_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="SQuAD-format JSON (v1.1 or v2.0).",
)
@click.option(
    "--init", "init", help="Encoder to start from: hub name or path (default: the packaged all-MiniLM-L6-v2)."
)
@click.option(
    "--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Where checkpoints go."
)
@click.option("--epochs", type=float, default=TRAIN_DEFAULTS["epochs"], show_default=True)
@click.option("--max-seq-length", type=int, default=TRAIN_DEFAULTS["max_seq_length"], show_default=True)
@click.option(
    "--stride",
    type=int,
    default=TRAIN_DEFAULTS["stride"],
    show_default=True,
    help="Tokens shared by consecutive windows.",
)
@click.option("--batch-size", type=int, default=TRAIN_DEFAULTS["batch_size"], show_default=True)
@click.option("--lr", type=float, default=TRAIN_DEFAULTS["lr"], show_default=True)
@click.option(
    "--warmup",
    type=float,
    default=TRAIN_DEFAULTS["warmup"],
    show_default=True,
    help="Warm-up: a fraction of steps (<1) or steps.",
)
@click.option("--max-steps", type=int, help="Total optimizer steps (overrides --epochs).")
@click.option(
    "--save-every",
    type=int,
    default=TRAIN_DEFAULTS["save_every"],
    show_default=True,
    help="Checkpoint (and evaluate) every N steps.",
)
@click.option(
    "--eval",
    "eval_file",
    type=click.Path(exists=True, dir_okay=False),
    help="SQuAD-format JSON scored at each checkpoint.",
)
@click.option(
    "--eval-limit",
    type=int,
    default=TRAIN_DEFAULTS["eval_limit"],
    show_default=True,
    help="Questions of --eval used at checkpoints.",
)
@click.option(
    "--negatives",
    type=float,
    default=TRAIN_DEFAULTS["negatives"],
    show_default=True,
    help="Unanswerable pairs added per question (teaches abstention).",
)
@click.option(
    "--exclude-ids", type=click.Path(exists=True, dir_okay=False), help="File of question ids to leave out."
)
@click.option("--time-limit", type=float, help="Minutes; then checkpoint and stop (continue with --resume).")
@click.option(
    "--threads", type=int, default=TRAIN_DEFAULTS["threads"], help="torch threads (0: torch's default)."
)
@click.option(
    "--device",
    default=TRAIN_DEFAULTS["device"],
    show_default=True,
    help="torch device: auto (a GPU where torch sees one, with bf16 autocast), cpu, cuda, cuda:1, ...",
)
@click.option("--seed", type=int, default=TRAIN_DEFAULTS["seed"], show_default=True)
@click.option("--resume", is_flag=True, help="Carry on from the checkpoint in --out.")
@click.pass_context
@friendly_errors
def reader_train(ctx: click.Context, **options: Any) -> None:
    """Fine-tune an encoder for span extraction on SQuAD-format data."""
    from reader.training import resolve_training_device, train
    from retriever.encoder import resolve_encoder_model

    try:
        resolve_training_device(options["device"])
    except (ValueError, RuntimeError) as exc:  # torch.device("gpu") raises RuntimeError
        raise click.BadParameter(first_line(exc), param_hint="--device") from exc
    config = TrainConfig(
        train_file=options["train_file"],
        init=options["init"] or resolve_encoder_model(DEFAULT_RETRIEVER_MODEL),
        out_dir=options["out_dir"],
        epochs=options["epochs"],
        max_seq_length=options["max_seq_length"],
        stride=options["stride"],
        batch_size=options["batch_size"],
        lr=options["lr"],
        warmup=options["warmup"],
        max_steps=options["max_steps"],
        save_every=options["save_every"],
        eval_file=options["eval_file"],
        eval_limit=options["eval_limit"],
        negatives=options["negatives"],
        exclude_ids_file=options["exclude_ids"],
        time_limit_minutes=options["time_limit"],
        threads=options["threads"],
        seed=options["seed"],
        device=options["device"],
    )
    fields = ("steps · loss {task.fields[loss]:.3f} · {task.fields[rate]:.1f} windows/s",)
    with progress_bar("train", fields=fields, remaining=True, transient=False) as progress:
        if progress.disable:
            # Runs last hours under nohup or a scheduler: without a bar, step lines are the only sign of life.
            logging.getLogger("reader.training").setLevel(logging.INFO)
        task = progress.add_task("train", total=None, loss=float("nan"), rate=0.0)

        def on_step(step: int, total: int, loss: float, rate: float) -> None:
            progress.update(task, completed=step, total=total, loss=loss, rate=rate)

        result = train(config, resume=options["resume"], on_step=on_step)
    state = "finished" if result.finished else "stopped (continue with --resume)"
    click.echo(f"{state} at step {result.global_step}/{result.total_steps}, {result.windows_seen} windows")
    for record in result.history[-5:]:
        click.echo(json.dumps(record))


@reader_group.command("export")
@click.argument("source", type=click.Path(exists=True, file_okay=False))
@click.argument("destination", type=click.Path(file_okay=False))
@click.option("--fp32", is_flag=True, help="Keep float32 weights (default: float16, half the size).")
@click.pass_context
@friendly_errors
def reader_export(ctx: click.Context, source: str, destination: str, fp32: bool) -> None:
    """Copy a trained reader (e.g. OUT/best) for shipping: safetensors weights and tokenizer files."""
    from reader.training import export_model

    path = export_model(source, destination, half=not fp32)
    size = sum(f.stat().st_size for f in path.iterdir() if f.is_file())
    click.echo(f"exported {source} to {path} ({size / 1e6:.1f} MB)")


def _parse_thresholds(value: str | None) -> list[float | None]:
    """``"none,0,3.5"`` -> ``[None, 0.0, 3.5]``; a word that is neither is a usage error."""
    if not value:
        return []
    thresholds: list[float | None] = []
    for word in value.split(","):
        word = word.strip().lower()
        if word in ("none", "never"):
            thresholds.append(None)
            continue
        try:
            thresholds.append(float(word))
        except ValueError:
            raise click.BadParameter(
                f"{word!r} is not a number or 'none'", param_hint="--thresholds"
            ) from None
    return thresholds


@reader_group.command("eval")
@click.option(
    "--data", required=True, type=click.Path(exists=True, dir_okay=False), help="SQuAD-format JSON."
)
@click.option("--model", help="Reader to evaluate: name or path (default: the reader setting).")
@click.option("--limit", type=click.IntRange(1), help="Only the first N questions.")
@click.option(
    "--threshold",
    type=float,
    help="Abstain below this margin (default: no_answer_threshold for v2.0 data; never for v1.1).",
)
@click.option(
    "--thresholds",
    "table_thresholds",
    callback=lambda ctx, param, value: _parse_thresholds(value),
    help="Also score these abstention thresholds from one pass, e.g. none,0,3,5,8 (none: never abstain).",
)
@json_option("the metrics")
@click.pass_context
@friendly_errors
def reader_eval(
    ctx: click.Context,
    data: str,
    model: str | None,
    limit: int | None,
    threshold: float | None,
    table_thresholds: list[float | None],
    as_json: bool,
) -> None:
    """Exact match and F1 (official SQuAD scoring) with the gold paragraph given."""
    from reader.evaluation import evaluate_reader
    from reader.reader import ExtractiveReader
    from reader.squad import load_squad

    settings = settings_from(ctx)
    if model:
        settings = settings.replace(reader_model=model)
    examples = load_squad(data)
    if limit:
        examples = examples[:limit]
    if threshold is None and any(ex.is_impossible for ex in examples):
        threshold = settings.no_answer_threshold
    reader = ExtractiveReader.from_settings(settings)
    reader.warm_up()
    with progress_bar("eval", disable=as_json) as progress:
        task = progress.add_task("eval", total=len(examples))
        metrics = evaluate_reader(
            reader,
            examples,
            no_answer_threshold=threshold,
            thresholds=table_thresholds,
            on_progress=lambda n: progress.advance(task, n),
        )
    metrics["model"] = settings.reader_model
    metrics["precision"] = reader.loaded_precision
    metrics["data"] = data
    metrics["threshold"] = threshold
    if as_json:
        print_json(metrics)
        return
    table = metrics.pop("threshold_table", None)
    for key, value in metrics.items():
        click.echo(f"{key:<16}{value:.2f}" if isinstance(value, float) else f"{key:<16}{value}")
    if table:
        from rich.table import Table

        names = ("threshold", "exact_match", "f1", "HasAns_f1", "NoAns_exact", "answered")
        columns = [key for key in names if key in table[0]]
        rendered = Table(*columns)
        for row in table:
            rendered.add_row(*("never" if row[key] is None else f"{row[key]:.2f}" for key in columns))
        console().print(rendered)
