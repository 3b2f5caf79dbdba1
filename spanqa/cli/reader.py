"""``spanqa reader``: train, export and evaluate span-extraction readers."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path
from typing import Any

import click

from spanqa.cli._errors import UserError, friendly_errors, settings_from
from spanqa.cli._options import json_option
from spanqa.cli._output import console, print_json, progress_bar
from spanqa.errors import first_line
from spanqa.reader.training import TrainConfig
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
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="SQuAD-format JSON (v1.1 or v2.0); repeat to train on several files at once (with --resume, the "
    "run's own).",
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
    "--cut-negatives",
    type=float,
    default=TRAIN_DEFAULTS["cut_negatives"],
    show_default=True,
    help="Share of those pairs that keep the question's own paragraph with its answer's sentences cut out.",
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
    from spanqa.reader.training import resolve_training_device, train
    from spanqa.retriever.encoder import resolve_encoder_model

    if not options["train_file"] and not options["resume"]:
        raise UserError("give the training data with --train FILE (or --resume a run in --out)")
    try:
        resolve_training_device(options["device"])
    except (ValueError, RuntimeError) as exc:  # torch.device("gpu") raises RuntimeError
        raise click.BadParameter(first_line(exc), param_hint="--device") from exc
    config = TrainConfig(
        train_file=os.pathsep.join(options["train_file"]),
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
        cut_negatives=options["cut_negatives"],
        exclude_ids_file=options["exclude_ids"],
        time_limit_minutes=options["time_limit"],
        threads=options["threads"],
        seed=options["seed"],
        device=options["device"],
    )
    fields = ("steps · loss {task.fields[loss]:.3f} · {task.fields[rate]:.1f} windows/s",)
    with progress_bar("train", fields=fields, transient=False) as progress:
        if progress.disable:
            # Runs last hours under nohup or a scheduler: without a bar, step lines are the only sign of life.
            logging.getLogger("spanqa.reader.training").setLevel(logging.INFO)
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
    from spanqa.reader.training import export_model

    path = export_model(source, destination, half=not fp32)
    click.echo(f"exported {source} to {path} ({_megabytes(path):.1f} MB)")


def _megabytes(folder: Path) -> float:
    """The size of the files directly in ``folder`` (an exported model), in MB."""
    return sum(f.stat().st_size for f in folder.iterdir() if f.is_file()) / 1e6


@reader_group.command("average")
@click.argument("tuned", type=click.Path(exists=True, file_okay=False))
@click.argument("base", type=click.Path(exists=True, file_okay=False))
@click.argument("destination", type=click.Path(file_okay=False))
@click.option(
    "--weight",
    type=click.FloatRange(0.0, 1.0),
    required=True,
    help="Share of TUNED in every weight (the rest is BASE's).",
)
@click.option("--fp32", is_flag=True, help="Keep float32 weights (default: float16, half the size).")
@click.pass_context
@friendly_errors
def reader_average(
    ctx: click.Context, tuned: str, base: str, destination: str, weight: float, fp32: bool
) -> None:
    """Export a reader whose weights lie between TUNED and the BASE it was fine-tuned from."""
    from spanqa.reader.training import average_models

    try:
        path = average_models(tuned, base, destination, weight=weight, half=not fp32)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    mixed = f"{weight:g} x {tuned} + {1 - weight:g} x {base}"
    click.echo(f"averaged {mixed} into {path} ({_megabytes(path):.1f} MB)")


@reader_group.command("soups")
@click.argument("tuned", type=click.Path(exists=True, file_okay=False))
@click.argument("base", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--weights",
    default="0.3,0.4,0.5,0.6,0.7",
    show_default=True,
    help="Shares of TUNED to score, comma-separated.",
)
@click.option(
    "--data",
    "data_sets",
    multiple=True,
    required=True,
    metavar="NAME=FILE",
    help="A SQuAD-format file to score on, named (repeatable), e.g. squad=dev.json.",
)
@click.option("--limit", type=click.IntRange(1), help="Only the first N questions of each file.")
@click.option("--device", default="auto", show_default=True, help="auto, cpu or cuda.")
@json_option("the scores")
@click.pass_context
@friendly_errors
def reader_soups(
    ctx: click.Context,
    tuned: str,
    base: str,
    weights: str,
    data_sets: tuple[str, ...],
    limit: int | None,
    device: str,
    as_json: bool,
) -> None:
    """EM/F1 of the readers between TUNED and its BASE at each weight, never abstaining, in one process
    (nothing written): what choosing `reader average --weight` needs."""
    from spanqa.reader.squad import load_squad
    from spanqa.reader.training import score_soups

    try:
        shares = [float(word) for word in weights.split(",") if word.strip()]
    except ValueError:
        raise click.BadParameter(f"{weights!r} is not a list of numbers", param_hint="--weights") from None
    data = {}
    for item in data_sets:
        name, sep, path = item.partition("=")
        if not sep or not name or not Path(path).is_file():
            raise click.BadParameter(f"{item!r} is not NAME=FILE with an existing file", param_hint="--data")
        examples = load_squad(path)
        data[name] = examples[:limit] if limit else examples
    try:
        rows = score_soups(tuned, base, shares, data, device=device)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    if as_json:
        print_json([{"weight": row.weight, **row.scores} for row in rows])
        return
    from rich.table import Table

    table = Table("weight", *(f"{name} EM / F1" for name in data))
    for row in rows:
        cells = (f"{row.scores[name]['exact_match']:.2f} / {row.scores[name]['f1']:.2f}" for name in data)
        table.add_row(f"{row.weight:g}", *cells)
    console().print(table)


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
    from spanqa.reader.evaluation import evaluate_reader
    from spanqa.reader.reader import ExtractiveReader
    from spanqa.reader.squad import load_squad

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


@reader_group.command("calibrate")
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    help="Where the calibrator goes (default: calibration.json beside the reader setting's local model).",
)
@click.option("--plot", type=click.Path(dir_okay=False), help="Also draw the reliability diagram (PNG).")
@click.option(
    "--seen",
    "seen_runs",
    multiple=True,
    type=click.Path(exists=True),
    help="A run over documents the reader was trained on (repeatable): it is fitted on too, weighing "
    "--seen-weight per answer, since the reader reads them better than a user's own.",
)
@click.option(
    "--seen-weight",
    type=click.FloatRange(min=0.0, min_open=True, max=1.0),
    default=0.5,
    show_default=True,
    help="What an answer of a --seen run counts in the fit.",
)
@json_option("the metrics")
@click.pass_context
@friendly_errors
def reader_calibrate(
    ctx: click.Context,
    runs: tuple[str, ...],
    out: str | None,
    plot: str | None,
    seen_runs: tuple[str, ...],
    seen_weight: float,
    as_json: bool,
) -> None:
    """Fit the score calibrator on RUNS: `eval squad --unanswerable --out` and `eval docs --out` folders (or
    their questions.jsonl), asked with the reader and retrieval settings the calibrator is for. Folds never
    split an article (SQuAD) or a file's first folder (a package of documentation) between fit and measure."""
    from spanqa.evaluation import abstention_report, read_questions, read_run_report
    from spanqa.reader.calibration import (
        CALIBRATION_FILE,
        WEIGHTS_KEY,
        answer_type_features,
        ece_noise_floor,
        evidence_products,
        expected_calibration_error,
        fit_calibrator,
        question_cues,
        weights_digest,
    )
    from spanqa.reader.model import resolve_reader_model

    settings = settings_from(ctx)
    runs = runs + tuple(run for run in seen_runs if run not in runs)
    weights = weights_digest(resolve_reader_model(settings.reader_model))
    for run in runs:
        # A calibrator fitted on another reader's answers would claim probabilities it never measured.
        asked_with = read_run_report(run).get(WEIGHTS_KEY)
        if asked_with and weights and asked_with != weights:
            raise UserError(
                f"{run} was asked with other reader weights ({asked_with}) than the reader's now "
                f"({weights}): ask it again with this reader, or set SPANQA_READER_MODEL to the reader it "
                "was asked with"
            )
    records = []
    for number, run in enumerate(runs):
        weight = seen_weight if run in seen_runs else 1.0
        for record in read_questions(run):
            records.append({**record, "article": f"{number}:{record.get('article', '')}", "weight": weight})
    if out:
        target = Path(out)
    else:
        location = Path(resolve_reader_model(settings.reader_model))
        if not location.is_dir():
            raise UserError(
                f"the reader '{settings.reader_model}' is not a local folder: give --out (and put the file "
                f"as {CALIBRATION_FILE} in the reader's folder to use it)"
            )
        target = location / CALIBRATION_FILE
    candidates = [r for r in records if r.get("features")]
    calibrator, metrics = fit_calibrator(
        # A run recorded before the answer-type and product features gets them from its question, answer
        # and evidence.
        [
            {
                **answer_type_features(question_cues(r.get("question") or ""), r.get("candidate") or ""),
                **evidence_products(r["features"]),
                **r["features"],
            }
            for r in candidates
        ],
        [bool(r["right"]) for r in candidates],
        [r["article"] for r in candidates],
        weights=[r["weight"] for r in candidates],
        info={
            "runs": list(runs),
            "seen_runs": list(seen_runs),
            "seen_weight": seen_weight if seen_runs else None,
            "reader_model": settings.reader_model,
            WEIGHTS_KEY: weights,
            "questions": len(records),
            "settings": settings.score_settings(),
        },
    )
    calibrator.save(target)
    # The curve over thresholds as the calibrated score would draw it, each question scored by a model
    # that never saw its article.
    held_out = {id(r): p for r, p in zip(candidates, metrics["probabilities_cv"], strict=True)}
    rescored = [{**r, "score": held_out.get(id(r))} for r in records]
    report = abstention_report(rescored, settings.min_score)
    # Pooled, a run's miscalibration can hide behind another's: each run is measured on its own too.
    by_run = {}
    for number, run in enumerate(runs):
        mine = [r for r in rescored if r["article"].startswith(f"{number}:")]
        scores = [r["score"] for r in mine if r["score"] is not None]
        labels = [bool(r["right"]) for r in mine if r["score"] is not None]
        by_run[run] = {
            "ece_cv": round(expected_calibration_error(scores, labels), 4),
            "ece_floor": round(ece_noise_floor(scores), 4),
            "curve_cv": abstention_report(mine, settings.min_score)["curve"],
        }
    summary = {
        "calibrator": str(target),
        "answers": metrics["answers"],
        "right": metrics["right"],
        "folds": metrics["folds"],
        "ece_cv": round(metrics["ece_cv"], 4),
        "by_run": by_run,
        "ece_relative_score": round(metrics["ece_relative_score"], 4),
        "reliability_cv": [
            {"bin": f"{low:.1f}-{high:.1f}", "answers": n, "mean_score": round(p, 4), "right": round(a, 4)}
            for low, high, n, p, a in metrics["reliability_cv"]
        ],
        "curve_cv": report["curve"],
    }
    if plot:
        _plot_reliability(metrics["reliability_cv"], metrics["ece_cv"], Path(plot))
        summary["plot"] = plot
    if as_json:
        print_json(summary)
        return
    click.echo(
        f"calibrator written to {target}: {metrics['answers']} answers ({metrics['right']} right), "
        f"ECE {metrics['ece_cv']:.3f} by {metrics['folds']}-fold cross-validation over articles "
        f"(the relative score: {metrics['ece_relative_score']:.3f})"
    )
    if len(runs) > 1:
        click.echo(
            "by run: "
            + "; ".join(
                f"{run} ECE {row['ece_cv']:.3f} (chance alone: {row['ece_floor']:.3f})"
                for run, row in by_run.items()
            )
        )
    from rich.table import Table

    table = Table("min_score", "right answers kept %", "abstain unseen %", "abstain cut %", show_edge=False)
    for row in report["curve"]:
        table.add_row(
            f"{row['threshold']:.2f}",
            f"{row['right_kept']:.1f}",
            f"{row['abstain_unseen_article']:.1f}",
            f"{row['abstain_cut_paragraph']:.1f}",
        )
    console().print(table)


def _plot_reliability(rows: list[tuple[float, float, int, float, float]], ece: float, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise UserError("--plot needs matplotlib: pip install matplotlib") from exc
    figure, axes = plt.subplots(figsize=(4.5, 4.5), dpi=120)
    axes.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="perfect calibration")
    centers = [(low + high) / 2 for low, high, _, _, _ in rows]
    axes.bar(centers, [a for *_, a in rows], width=0.09, alpha=0.7, label="share right")
    axes.plot([p for _, _, _, p, _ in rows], [a for *_, a in rows], marker="o", color="black", label="bins")
    axes.set_xlabel("score (calibrated, out of fold)")
    axes.set_ylabel("share of answers that are right")
    axes.set_title(f"Reliability, ECE {ece:.3f}")
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1)
    axes.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
