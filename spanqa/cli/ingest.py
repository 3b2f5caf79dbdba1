"""``spanqa ingest`` and ``spanqa reindex``: fill the index from files, rebuild it from the catalog."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from spanqa.cli._errors import UserError, friendly_errors, settings_from
from spanqa.cli._options import file_filter_options, json_option
from spanqa.cli._output import console, print_json, progress_bar
from spanqa.runtime import Runtime

if TYPE_CHECKING:
    from ingest.job import IngestJob, IngestReport
    from spanqa.types import Job


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--prune/--no-prune",
    default=True,
    show_default=True,
    help="Drop documents whose files have vanished from these folders (renamed files count as vanished).",
)
@file_filter_options
@click.option("--background", is_flag=True, help="Enqueue the work for `spanqa worker` and print a job id.")
@json_option("the report")
@click.pass_context
@friendly_errors
def ingest(
    ctx: click.Context,
    paths: tuple[str, ...],
    prune: bool,
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    background: bool,
    as_json: bool,
) -> None:
    """Load, chunk and embed every file under PATHS (new and changed files only).

    The index mirrors the folders: files that vanished from them are dropped (--no-prune keeps them), and a
    file that no longer loads stops answering until it loads again.
    """
    settings = settings_from(ctx)
    if background:
        from workers.client import enqueue_ingest, require_broker

        require_broker(settings, "--background")
        absolute = []
        for raw in paths:
            path = Path(raw).expanduser()
            if not path.exists():
                raise UserError(f"no such file or folder: {raw}")
            absolute.append(str(path.absolute()))
        job = enqueue_ingest(settings, absolute, prune=prune, include=include, exclude=exclude)
        print_queued(job, as_json=as_json)
        return
    with Runtime(settings) as runtime:
        job_runner = runtime.ingest_job()
        found = job_runner.discover(paths, include=include, exclude=exclude)
        report = _run_with_progress(job_runner, paths, prune, include, exclude, len(found), quiet=as_json)
    if as_json:
        print_json(
            {
                "summary": report.summary(),
                "chunks_embedded": report.chunks_embedded,
                "seconds": round(report.seconds, 3),
                "model_load_seconds": round(report.load_seconds, 3),
                "chunks_per_second": round(report.chunks_per_second, 2),
                "orphans_removed": report.orphans_removed,
                "skipped": report.skipped,
                "skipped_files": [dataclasses.asdict(f) for f in report.skipped_files],
                "files": [o.__dict__ for o in report.outcomes],
            }
        )
    else:
        kept = 0 if prune else len(job_runner.vanished(paths))
        verbose = (ctx.find_root().obj or {}).get("verbose", 0)
        _print_report(report, found_any=bool(found) or prune, vanished_kept=kept, name_skipped=verbose > 0)
    ctx.exit(report.exit_code)


def print_queued(job: Job, *, as_json: bool) -> None:
    """Say which job was queued and how to follow it."""
    if as_json:
        print_json({"job_id": job.id, "state": job.state})
    else:
        click.echo(f"queued job {job.id} (follow it with `spanqa jobs {job.id} --watch`)")


def _run_with_progress(
    job: IngestJob, paths: Any, prune: bool, include: Any, exclude: Any, total: int, *, quiet: bool
) -> IngestReport:
    fields = ("files", "{task.fields[chunks]} chunks", "{task.fields[rate]:.1f} chunks/s")
    with progress_bar("ingest", fields=fields, disable=quiet or total == 0) as progress:
        task = progress.add_task("ingest", total=total, chunks=0, rate=0.0)

        def on_progress(event: Any) -> None:
            elapsed = max((progress.tasks[0].elapsed or 0.0) - event.load_seconds, 1e-9)
            progress.update(
                task, completed=event.files_done, chunks=event.chunks_done, rate=event.chunks_done / elapsed
            )

        return job.run(paths, prune=prune, include=include, exclude=exclude, on_progress=on_progress)


def _print_report(
    report: IngestReport, *, found_any: bool, vanished_kept: int, name_skipped: bool = False
) -> None:
    out = console()
    if name_skipped:
        for skipped in report.skipped_files:
            hint = f" ({skipped.hint})" if skipped.hint else ""
            out.print(f"  [dim]skipped[/dim] {skipped.path}: {skipped.reason}{hint}", highlight=False)
    if not found_any:
        out.print("nothing to ingest: no supported files found" + _skipped_text(report))
        return
    s = report.summary()
    out.print(
        f"{s['new']} new, {s['changed']} changed, {s['unchanged']} unchanged, {s['failed']} failed"
        + (f", {s['pruned']} vanished (dropped)" if s["pruned"] else "")
        + (f", {vanished_kept} vanished (kept: --no-prune)" if vanished_kept else "")
        + f" · {report.chunks_embedded} chunks embedded in {report.seconds:.1f}s "
        + f"({report.chunks_per_second:.1f} chunks/s"
        + (f", after {report.load_seconds:.1f}s loading the model)" if report.load_seconds >= 0.05 else ")")
        + _skipped_text(report)
    )
    for outcome in report.failures:
        out.print(f"  [red]failed[/red] {outcome.path}: {outcome.error}")
    if report.orphans_removed:
        out.print(f"  removed {report.orphans_removed} orphan points left by an interrupted run")


def _skipped_text(report: IngestReport) -> str:
    """`` · skipped: 2 hidden, 1 not text`` (empty when nothing was skipped)."""
    counts = [f"{n} {reason}" for reason, n in sorted(report.skipped.items()) if n]
    return f" · skipped: {', '.join(counts)} (-v names them)" if counts else ""


@click.command()
@click.option(
    "--retriever-model", help="Rebuild with this retriever model (then set SPANQA_RETRIEVER_MODEL to it)."
)
@click.option("--background", is_flag=True, help="Enqueue the rebuild for `spanqa worker`.")
@json_option("the result")
@click.pass_context
@friendly_errors
def reindex(ctx: click.Context, retriever_model: str | None, background: bool, as_json: bool) -> None:
    """Rebuild the vector collection from the catalog (blue/green: one atomic switch at the end)."""
    from ingest.reindex import reindex as run_reindex

    settings = settings_from(ctx)
    if retriever_model:
        settings = settings.replace(retriever_model=retriever_model)
    if background:
        from workers.client import enqueue_reindex

        print_queued(enqueue_reindex(settings, settings.retriever_model), as_json=as_json)
        return
    with Runtime(settings) as runtime:
        report = run_reindex(catalog=runtime.catalog, encoder=runtime.encoder, index=runtime.index)
    data = {
        "previous": report.previous.collection if report.previous else None,
        "current": report.current.collection,
        "model": report.current.model_name,
        "chunks": report.chunks,
        "seconds": round(report.seconds, 2),
    }
    if as_json:
        print_json(data)
    else:
        click.echo(
            f"re-indexed {report.chunks} chunks into {report.current.collection} in {report.seconds:.1f}s"
        )
        if retriever_model:
            click.echo(f"now set SPANQA_RETRIEVER_MODEL={retriever_model} so questions use the same model")
