"""``spanqa eval``: measure the whole pipeline on benchmark data."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from spanqa.cli._errors import UserError, friendly_errors, settings_from
from spanqa.cli._options import json_option
from spanqa.cli._output import console, print_json, progress_bar
from spanqa.runtime import Runtime


@click.group("eval")
def eval_group() -> None:
    """Measure the whole pipeline on benchmark data."""


@eval_group.command("squad")
@click.argument("data", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--limit", type=click.IntRange(1), help="Ask only the first N questions (all articles are ingested)."
)
@click.option(
    "--sample",
    type=click.IntRange(1),
    help="Ask N questions spread over all articles (those whose SHA-1 of the id sorts first).",
)
@click.option(
    "--passages", type=click.IntRange(1, 200), help="Passages the reader reads (default: the setting)."
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Write report.json, questions.jsonl and the index here.",
)
@click.option(
    "--unanswerable",
    is_flag=True,
    help="Leave some articles and paragraphs out; report abstention on their questions and calibration.",
)
@json_option("the metrics")
@click.pass_context
@friendly_errors
def eval_squad(
    ctx: click.Context,
    data: str,
    limit: int | None,
    sample: int | None,
    passages: int | None,
    out_dir: str | None,
    unanswerable: bool,
    as_json: bool,
) -> None:
    """Open-setting SQuAD: ingest every article of DATA, ask every question, score it."""
    from reader.squad import load_squad
    from spanqa.evaluation import evaluate_squad, write_report

    settings = settings_from(ctx)
    load_squad(data)  # a file that is not SQuAD fails here, before an index is made
    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="spanqa-eval-"))
    work = out / "index"
    if work.exists() and any(work.iterdir()):
        raise UserError(f"{work} is not empty: give a new --out folder")
    eval_settings = settings.replace(data_dir=work, model_cache_dir=settings.model_cache)
    with (
        Runtime(eval_settings) as runtime,
        progress_bar("{task.description}", remaining=True, disable=as_json) as progress,
    ):
        task = progress.add_task("prepare", total=None)

        def on_stage(name: str, total: int) -> None:
            progress.update(task, description=name, total=total if name == "ask" else None, completed=0)

        report = evaluate_squad(
            runtime,
            data,
            limit=limit,
            sample=sample,
            passages=passages,
            unanswerable=unanswerable,
            on_stage=on_stage,
            on_progress=lambda n: progress.advance(task, n),
        )
    metrics_file, questions_file = write_report(report, out)
    if as_json:
        print_json(report.metrics)
        return
    from rich.table import Table

    m = report.metrics
    table = Table(
        title=f"SQuAD open setting: {m['questions']} questions, {m['chunks']} chunks", show_edge=False
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k, v in m["recall"].items():
        table.add_row(f"retrieval recall{k}", f"{v:.1f}")
    table.add_row(
        "reader-only EM / F1", f"{m['reader_only']['exact_match']:.1f} / {m['reader_only']['f1']:.1f}"
    )
    table.add_row("end-to-end EM / F1", f"{m['end_to_end']['exact_match']:.1f} / {m['end_to_end']['f1']:.1f}")
    never = m["end_to_end_never_abstain"]
    table.add_row("  never abstaining (min score 0)", f"{never['exact_match']:.1f} / {never['f1']:.1f}")
    table.add_row("abstention rate", f"{m['abstention_rate']:.1f}%")
    for stage, values in m["latency"].items():
        table.add_row(f"{stage} p50 / p95 ms", f"{values['p50_ms']:.0f} / {values['p95_ms']:.0f}")
    table.add_row("ingest chunks/s", f"{m['ingest']['chunks_per_s']:.1f}")
    if "unanswerable" in m:
        u = m["unanswerable"]
        for kind, values in u["kinds"].items():
            table.add_row(f"abstained: {kind} ({values['questions']})", f"{values['abstained']:.1f}%")
        table.add_row(f"answered right at min_score {u['min_score']:g}", f"{u['answered_right']:.1f}%")
        table.add_row("calibration error (ECE)", f"{u['ece']:.3f}")
    console().print(table)
    click.echo(f"report: {metrics_file}\nper question: {questions_file}")
