"""``spanqa ask`` and ``spanqa search``: answers with exact spans, or the passages nearest a query."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from spanqa.cli._errors import UserError, friendly_errors, settings_from
from spanqa.cli._options import json_option, path_glob_option
from spanqa.cli._output import confidence, console, passage_dict, print_json, shorten, timings_ms, where

if TYPE_CHECKING:
    from spanqa.pipeline import AskResult


@click.command()
@click.argument("query")
@click.option(
    "-k", "--top-k", default=5, show_default=True, type=click.IntRange(1, 1000), help="Passages to show."
)
@path_glob_option
@json_option("results")
@click.pass_context
@friendly_errors
def search(ctx: click.Context, query: str, top_k: int, path_glob: str | None, as_json: bool) -> None:
    """Find the passages nearest to QUERY (retriever only)."""
    from spanqa.runtime import Runtime
    from workers.client import StoreGateway

    if not query.strip():
        raise UserError("the query is empty")
    settings = settings_from(ctx)
    from spanqa.pipeline import require_data

    require_data(settings)
    with Runtime(settings) as runtime:
        result = StoreGateway(runtime).search(query, top_k=top_k, path_glob=path_glob)
    if as_json:
        print_json(
            {
                "query": query,
                "passages": [passage_dict(p) for p in result.passages],
                "timings_ms": timings_ms(result.timings),
            }
        )
        return
    out = console()
    if not result.passages:
        out.print("no passages found")
        return
    for p in result.passages:
        out.print(
            f"[bold]{p.rank}.[/bold] {p.score:.3f}  [cyan]{where(p.path, p.page)}[/cyan]  "
            f"chars {p.char_start}-{p.char_end}"
        )
        if p.heading:
            out.print("   " + shorten(p.heading, 200), style="dim", markup=False)
        out.print("   " + shorten(p.text, 300), markup=False)


@click.command()
@click.argument("question")
@click.option(
    "-k", "--answers", type=click.IntRange(1, 50), help="Answers to show (default: the answers setting)."
)
@click.option(
    "--passages",
    type=click.IntRange(1, 200),
    help="Passages the reader reads (default: the passages setting).",
)
@click.option(
    "--min-score",
    type=click.FloatRange(0.0, 1.0),
    help="Hide answers less likely than this to be right (default: the min_score setting).",
)
@path_glob_option
@json_option("results (one object per question)")
@click.pass_context
@friendly_errors
def ask(
    ctx: click.Context,
    question: str,
    answers: int | None,
    passages: int | None,
    min_score: float | None,
    path_glob: str | None,
    as_json: bool,
) -> None:
    """Answer QUESTION with exact spans of your documents ('-' reads one question per line from stdin)."""
    from spanqa.runtime import Runtime
    from workers.client import StoreGateway

    settings = settings_from(ctx)
    from spanqa.pipeline import require_data

    require_data(settings)
    threshold = settings.min_score if min_score is None else min_score
    with Runtime(settings) as runtime:
        gateway = StoreGateway(runtime)
        if question != "-":
            if not question.strip():
                raise UserError("the question is empty")
            result = gateway.ask(
                question, passages=passages, answers=answers, min_score=min_score, path_glob=path_glob
            )
            _print_answers(result, as_json=as_json, min_score=threshold)
            return
        interactive = sys.stdin.isatty() and not as_json
        gateway.warm_up_reader()
        while True:
            if interactive:
                try:
                    line = click.prompt("question", prompt_suffix="> ", default="", show_default=False)
                except (EOFError, click.Abort):
                    click.echo()
                    return
            else:
                line = sys.stdin.readline()
                if not line:
                    return
            line = line.strip()
            if not line:
                continue
            result = gateway.ask(
                line, passages=passages, answers=answers, min_score=min_score, path_glob=path_glob
            )
            _print_answers(result, as_json=as_json, min_score=threshold, compact_json=True)


def _print_answers(result: AskResult, *, as_json: bool, min_score: float, compact_json: bool = False) -> None:
    if as_json:
        data = {
            "question": result.question,
            "abstained": result.abstained,
            "answers": [a.to_dict() for a in result.answers],
            "passages": [passage_dict(p) for p in result.passages],
            "timings_ms": timings_ms(result.timings),
        }
        print_json(data, compact=compact_json)
        return
    from rich.text import Text

    out = console()
    if not result.passages:
        out.print("no answer found: no passages to read")
        return
    if result.abstained:
        hint = (
            f" (none is {min_score:.0%} likely; --min-score 0 shows less likely answers)"
            if min_score > 0
            else ""
        )
        out.print(f"[yellow]no answer found in your documents[/yellow]{hint}; the closest passages:")
        for p in result.passages[:3]:
            out.print(
                f"  {p.score:.3f}  [cyan]{where(p.path, p.page)}[/cyan]  chars {p.char_start}-{p.char_end}"
            )
            out.print("     " + shorten(p.text, 200), markup=False)
        return
    for rank, a in enumerate(result.answers, 1):
        header = Text(f"{rank}. ", style="bold")
        header.append(a.text, style="bold green")
        header.append(f"   {confidence(a.score)}")
        out.print(header)
        out.print(f"   [cyan]{where(a.path, a.page)}[/cyan]  chars {a.char_start}-{a.char_end}")
        start = a.char_start - a.context_start
        end = start + len(a.text)
        context = Text("   ")
        context.append(a.context[:start])
        context.append(a.context[start:end], style="bold reverse")
        context.append(a.context[end:])
        out.print(context)
    timings = " · ".join(f"{k} {v * 1000:.0f} ms" for k, v in result.timings.items())
    out.print(f"[dim]{timings}[/dim]")
