"""``spanqa eval``: measure the whole pipeline on benchmark data."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import click

from spanqa.cli._errors import UserError, friendly_errors, settings_from
from spanqa.cli._options import json_option
from spanqa.cli._output import ProgressLines, console, print_json, progress_bar
from spanqa.runtime import Runtime

#: One spelling of --passages for every evaluation.
passages_option = click.option(
    "--passages", type=click.IntRange(1, 200), help="Passages the reader reads (default: the setting)."
)


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
@passages_option
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
    from spanqa.evaluation import evaluate_squad, write_report
    from spanqa.reader.squad import load_squad

    settings = settings_from(ctx)
    load_squad(data)  # a file that is not SQuAD fails here, before an index is made
    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="spanqa-eval-"))
    work = out / "index"
    if work.exists() and any(work.iterdir()):
        raise UserError(f"{work} is not empty: give a new --out folder")
    eval_settings = settings.replace(data_dir=work, model_cache_dir=settings.model_cache)
    with (
        Runtime(eval_settings) as runtime,
        progress_bar("{task.description}", disable=as_json) as progress,
    ):
        task = progress.add_task("prepare", total=None)
        lines = ProgressLines("prepare") if as_json else None
        done, stage_total = 0, None

        def on_stage(name: str, total: int) -> None:
            nonlocal lines, done, stage_total
            progress.update(task, description=name, total=total if name == "ask" else None, completed=0)
            lines, done, stage_total = (ProgressLines(name) if as_json else None), 0, total

        def on_progress(n: int) -> None:
            nonlocal done
            progress.advance(task, n)
            done += n
            if lines is not None:
                lines.update(done, stage_total)

        report = evaluate_squad(
            runtime,
            data,
            limit=limit,
            sample=sample,
            passages=passages,
            unanswerable=unanswerable,
            on_stage=on_stage,
            on_progress=on_progress,
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


@eval_group.command("docs")
@click.argument("questions", type=click.Path(exists=True, dir_okay=False))
@passages_option
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Write report.json, questions.jsonl and reliability.svg here.",
)
@click.option("--limit", type=click.IntRange(1), help="Ask only the first N questions.")
@json_option("the metrics")
@click.pass_context
@friendly_errors
def eval_docs(
    ctx: click.Context,
    questions: str,
    passages: int | None,
    out_dir: str | None,
    limit: int | None,
    as_json: bool,
) -> None:
    """Your documents, your questions: ask every question of QUESTIONS over the ingested documents.

    QUESTIONS is JSON: a list (or {"questions": [...]}, or JSON lines) of {"question", "answers": [...],
    "file", "offset"}, with "answers": [] or "unanswerable": true for a question the documents do not answer
    (see docs/evaluation.md). Reports the top answer right, right among those shown, the answer's passage at
    ranks 1/5/10, questions declined, the score's calibration error (ECE), and each by file kind.
    """
    from spanqa.docs_eval import evaluate_docs, read_doc_questions, reliability_svg
    from spanqa.evaluation import write_report

    settings = settings_from(ctx)
    asked = read_doc_questions(questions)[:limit]
    if not settings.data_dir.is_dir() and settings.qdrant_url is None:
        raise UserError(f"no spanqa data folder at {settings.data_dir}: ingest your documents first")
    with (
        Runtime(settings) as runtime,
        progress_bar("asking", disable=as_json) as progress,
    ):
        if runtime.catalog.counts()["chunks"] == 0:
            raise UserError("nothing is indexed: `spanqa ingest` your documents first")
        task = progress.add_task("asking", total=len(asked))
        lines = ProgressLines("ask") if as_json else None
        done = 0

        def on_progress(n: int) -> None:
            nonlocal done
            progress.advance(task, n)
            done += n
            if lines is not None:
                lines.update(done, len(asked))

        report = evaluate_docs(runtime, asked, passages=passages, source=questions, on_progress=on_progress)
    if out_dir:
        out = Path(out_dir)
        metrics_file, questions_file = write_report(report, out)
        (out / "reliability.svg").write_text(reliability_svg(report.per_question, Path(questions).name))
    if as_json:
        print_json(report.metrics)
        return
    _print_docs_report(report.metrics)
    if out_dir:
        click.echo(f"report: {metrics_file}\nper question: {questions_file}\nplot: {out / 'reliability.svg'}")


def _print_docs_report(m: dict[str, Any]) -> None:
    from rich.table import Table

    def cell(value: float | None, digits: int = 1) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    groups = {"all": m, **{f"  {kind}": values for kind, values in m["by_kind"].items()}}
    if m["hard"]["answerable"]:
        groups["  hard"] = m["hard"]
    table = Table(
        title=f"{m['questions']} questions ({m['answerable']} answerable), min score {m['min_score']:g}",
        show_edge=False,
    )
    for column in (
        "",
        "questions",
        "top right",
        "right shown",
        "passage@1/5/10",
        "declined",
        "no-answer ok",
        "ECE",
    ):
        table.add_column(column, justify="left" if not column else "right")
    for name, g in groups.items():
        table.add_row(
            name,
            f"{g['answerable']}+{g['unanswerable']}",
            cell(g["top_right"]),
            cell(g["right_among_shown"]),
            "/".join(cell(g[f"passage_at_{k}"], 0) for k in (1, 5, 10)),
            cell(g["answerable_declined"]),
            cell(g["unanswerable_declined"]),
            cell(g["ece"], 3),
        )
    console().print(table)
    if m["files_not_indexed_count"]:
        click.echo(
            f"warning: {m['files_not_indexed_count']} named files are not indexed "
            f"(e.g. {m['files_not_indexed'][0]}): their passages never count as found",
            err=True,
        )
