"""``spanqa retriever``: train and evaluate the bi-encoder."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import click

from spanqa.cli._errors import UserError, friendly_errors
from spanqa.cli._options import json_option
from spanqa.cli._output import console, print_json
from spanqa.retriever.training import LOSSES, RetrieverTrainConfig
from spanqa.settings import DEFAULT_RETRIEVER_MODEL

# The options' defaults are RetrieverTrainConfig's: one owner for each.
DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(RetrieverTrainConfig)}


@click.group("retriever")
def retriever_group() -> None:
    """Train and evaluate the retriever's bi-encoder."""


def _parse_layers(value: str | None) -> tuple[int, ...] | None:
    """``"0,2,4"`` -> ``(0, 2, 4)``; anything else is a usage error."""
    if not value:
        return None
    try:
        return tuple(int(word) for word in value.split(","))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a list of layer numbers such as 0,2,4") from None


@retriever_group.command("train")
@click.option("--train", "train_file", type=click.Path(exists=True, dir_okay=False), help="SQuAD JSON.")
@click.option("--init", default=DEFAULT_RETRIEVER_MODEL, show_default=True, help="Model to start from.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Where the run goes.")
@click.option("--loss", type=click.Choice(LOSSES), default=DEFAULTS["loss"], show_default=True)
@click.option("--epochs", type=float, default=DEFAULTS["epochs"], show_default=True)
@click.option("--batch-size", type=click.IntRange(2), default=DEFAULTS["batch_size"], show_default=True)
@click.option("--lr", type=float, default=DEFAULTS["lr"], show_default=True)
@click.option(
    "--warmup", type=float, default=DEFAULTS["warmup"], show_default=True, help="Fraction or steps."
)
@click.option(
    "--max-seq-length", type=click.IntRange(16), default=DEFAULTS["max_seq_length"], show_default=True
)
@click.option(
    "--hard-negatives",
    type=click.IntRange(0, 20),
    default=DEFAULTS["hard_negatives"],
    show_default=True,
    help="BM25-mined paragraphs per question that hold no gold answer.",
)
@click.option(
    "--keep-layers",
    callback=lambda ctx, param, value: _parse_layers(value),
    help="Keep only these layers of --init, e.g. 0,2,4: a shallower, faster encoder (with --loss distill).",
)
@click.option("--limit", type=click.IntRange(1), help="Train on a seeded sample of N questions.")
@click.option("--max-steps", type=click.IntRange(1), help="Total optimizer steps (overrides --epochs).")
@click.option("--save-every", type=click.IntRange(1), default=DEFAULTS["save_every"], show_default=True)
@click.option("--eval", "eval_file", type=click.Path(exists=True, dir_okay=False), help="Scored at saves.")
@click.option("--eval-limit", type=click.IntRange(1), default=DEFAULTS["eval_limit"], show_default=True)
@click.option("--time-limit", "time_limit_minutes", type=float, help="Stop after this many minutes.")
@click.option("--device", default=DEFAULTS["device"], show_default=True, help="auto, cpu or cuda.")
@click.option("--resume", is_flag=True, help="Continue the run in --out from its last checkpoint.")
@click.pass_context
@friendly_errors
def train(ctx: click.Context, resume: bool, **options: Any) -> None:
    """Fine-tune a bi-encoder on (question, paragraph) pairs of SQuAD-format data."""
    from click.core import ParameterSource

    from spanqa.retriever.training import config_with, load_config, train_retriever

    logging.getLogger("spanqa.retriever.training").setLevel(logging.INFO)
    if resume:  # the saved run's settings, with what this command line sets (e.g. a longer --time-limit)
        given = {
            k: v for k, v in options.items() if ctx.get_parameter_source(k) == ParameterSource.COMMANDLINE
        }
        config = config_with(load_config(options["out_dir"]), **given)
    else:
        if not options["train_file"]:
            raise UserError("--train is required (or --resume to continue a run)")
        config = RetrieverTrainConfig(**{k: v for k, v in options.items() if v is not None})
    result = train_retriever(config, resume=resume)
    out = console(stderr=True)
    if result.global_step < result.max_steps:
        out.print(f"stopped at step {result.global_step} of {result.max_steps}: --resume continues")
    out.print(f"model saved to {result.final} (use it with SPANQA_RETRIEVER_MODEL={result.final})")


@retriever_group.command("eval")
@click.option("--data", "data_file", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--model", default=DEFAULT_RETRIEVER_MODEL, show_default=True, help="Name or path.")
@click.option("--limit", type=click.IntRange(1), help="Score a seeded sample of this many questions.")
@click.option("--device", default="auto", show_default=True)
@json_option("the metrics")
@friendly_errors
def evaluate(data_file: str, model: str, limit: int | None, device: str, as_json: bool) -> None:
    """Recall@1/5/10/20 and MRR@10: every paragraph of DATA is the corpus, its questions the queries."""
    from spanqa.retriever.training import evaluate_retriever

    metrics = evaluate_retriever(model, data_file, limit=limit, device=device)
    if as_json:
        print_json(metrics)
        return
    recall = "  ".join(f"r{k} {v:.4f}" for k, v in metrics["recall"].items())
    sizes = f"{metrics['questions']} questions, {metrics['paragraphs']} paragraphs"
    console().print(f"{sizes}: {recall}  MRR@10 {metrics['mrr@10']:.4f}")
