"""``spanqa ask`` and ``spanqa search``: answers with exact spans, or the passages nearest a query."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from spanqa.cli._errors import UserError, friendly_errors, settings_from
from spanqa.cli._options import json_option, path_glob_option
from spanqa.cli._output import console, passage_score, print_json, say_waiting, shorten, where
from spanqa.records import ask_record, confidence, search_record
from spanqa.runtime import Runtime, require_data
from spanqa.types import AskOptions, SearchOptions

if TYPE_CHECKING:
    from spanqa.ingest.positions import Places
    from spanqa.pipeline import AskResult
    from spanqa.types import Answer

#: Typed at the `ask -` prompt (or read from stdin), these end the loop.
QUIT_WORDS = frozenset({"quit", "exit", ":q"})


def answer_surroundings(answer: Answer, extra: int) -> tuple[str, int]:
    """The answer's sentence with ``extra`` sentences of its passage on each side, and its document offset."""
    if extra == 0 or answer.char_start < answer.passage.char_start:  # an entry title is its own context
        return answer.context, answer.context_start
    from spanqa.text import sentence_spans

    passage = answer.passage
    spans = sentence_spans(passage.text)
    start, end = answer.char_start - passage.char_start, answer.char_end - passage.char_start
    first = next((i for i, (a, b) in enumerate(spans) if a <= start < b), None)
    last = next((i for i, (a, b) in enumerate(spans) if a < end <= b), first)
    if first is None or last is None:
        return answer.context, answer.context_start
    low, high = spans[max(0, first - extra)][0], spans[min(len(spans) - 1, last + extra)][1]
    return passage.text[low:high], passage.char_start + low


@click.command()
@click.argument("query")
@click.option(
    "-k", "--top-k", type=click.IntRange(1, 1000), help="Passages to show (default: the search_top_k setting)"
)
@path_glob_option
@json_option("results")
@click.pass_context
@friendly_errors
def search(ctx: click.Context, query: str, top_k: int | None, path_glob: str | None, as_json: bool) -> None:
    """Find the passages nearest to QUERY (retriever only)."""
    from spanqa.workers.client import StoreGateway

    if not query.strip():
        raise UserError("the query is empty")
    settings = settings_from(ctx)
    require_data(settings)
    with Runtime(settings, on_wait=say_waiting) as runtime:
        result = StoreGateway(runtime).search(query, SearchOptions(top_k=top_k, path_glob=path_glob))
    if as_json:
        print_json(search_record(query, result))
        return
    out = console()
    if not result.passages:
        out.print("no passages found")
        return
    for p in result.passages:
        out.print(
            f"[bold]{p.rank}.[/bold] {passage_score(p.score, settings.retrieval)}  "
            f"[cyan]{where(p.path, p.page)}[/cyan]  "
            f"chars {p.char_start}-{p.char_end}"
        )
        if p.heading:
            out.print("   " + shorten(p.heading, 200), style="dim", markup=False)
        out.print("   " + shorten(p.text, 300), markup=False)
        for c in p.copies:
            place = f"{where(c.path, c.page)}  chars {c.char_start}-{c.char_end}"
            out.print(f"   [dim]near-duplicate in[/dim] [cyan]{place}[/cyan]")


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
@click.option(
    "--context",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Sentences shown on each side of the answer's sentence (a large number: the whole passage).",
)
@click.option(
    "--vimgrep",
    is_flag=True,
    help="Print one PATH:LINE:COLUMN:ANSWER line per answer, for editors (vim's :cexpr, grep modes).",
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
    context: int,
    vimgrep: bool,
    path_glob: str | None,
    as_json: bool,
) -> None:
    """Answer QUESTION with exact spans of your documents ('-' reads one question per line from stdin)."""
    if vimgrep and as_json:
        raise UserError("--vimgrep and --json are two output formats: choose one")
    if question != "-" and not question.strip():
        raise UserError("the question is empty")
    settings = settings_from(ctx)
    require_data(settings)
    threshold = settings.min_score if min_score is None else min_score
    options = AskOptions(passages=passages, answers=answers, min_score=min_score, path_glob=path_glob)
    with Runtime(settings, on_wait=say_waiting) as runtime:
        runtime.preload_models()  # the models load while the catalog and pipeline are imported
        from spanqa.workers.client import StoreGateway

        gateway = StoreGateway(runtime)

        from spanqa.ingest.positions import Places

        places = Places(runtime.catalog)

        def show(result: AskResult, *, compact_json: bool = False) -> None:
            if vimgrep:
                _print_vimgrep(places, result)
            else:
                _print_answers(
                    result,
                    as_json=as_json,
                    min_score=threshold,
                    context=context,
                    compact_json=compact_json,
                    retrieval=settings.retrieval,
                    places=places,
                )

        if question != "-":
            result = gateway.ask(question, options)
            show(result)
            return
        interactive = sys.stdin.isatty() and not as_json and not vimgrep
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
            if line.lower() in QUIT_WORDS:
                return
            if not interactive and not as_json and not vimgrep:
                console().print(f"[bold]? {line}[/bold]", markup=True, highlight=False)
            result = gateway.ask(line, options)
            show(result, compact_json=True)


def _print_vimgrep(places: Places, result: AskResult) -> None:
    """PATH:LINE:COLUMN:ANSWER per answer, the position in the file on disk (1:1 for PDF, DOCX, ...)."""
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    for a in result.answers:
        line, column = places.position(a.path, a.document_id, a.char_start, a.char_end) or (1, 1)
        click.echo(f"{a.path}:{line}:{column}:{' '.join(a.text.split())}")


def _print_answers(
    result: AskResult,
    *,
    as_json: bool,
    min_score: float,
    context: int,
    retrieval: str,
    places: Places,
    compact_json: bool = False,
) -> None:
    if as_json:
        print_json(ask_record(result, places=places.of_answer), compact=compact_json)
        return
    from rich.text import Text

    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
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
                f"  {p.rank}. {passage_score(p.score, retrieval)}  [cyan]{where(p.path, p.page)}[/cyan]  "
                f"chars {p.char_start}-{p.char_end}"
            )
            out.print("     " + shorten(p.text, 200), markup=False)
        return
    for rank, a in enumerate(result.answers, 1):
        header = Text(f"{rank}. ", style="bold")
        header.append(a.text, style="bold green")
        header.append(f"   {confidence(a.score)}")
        out.print(header)
        place = places.describe(a.path, a.document_id, a.char_start, a.char_end, a.page)
        out.print(
            f"   [cyan]{place}[/cyan]  [dim]text chars {a.char_start}-{a.char_end}[/dim]", highlight=False
        )
        for source in a.also_in:
            other = places.describe(
                source.path, source.document_id, source.char_start, source.char_end, source.page
            )
            out.print(f"   [dim]also in[/dim] [cyan]{other}[/cyan]", highlight=False)
        around, around_start = answer_surroundings(a, context)
        start = a.char_start - around_start
        end = start + len(a.text)
        shown = Text("   ")
        shown.append(around[:start])
        shown.append(around[start:end], style="bold reverse")
        shown.append(around[end:])
        out.print(shown)
    timings = " · ".join(f"{k} {v * 1000:.0f} ms" for k, v in result.timings.items())
    out.print(f"[dim]{timings}[/dim]")
