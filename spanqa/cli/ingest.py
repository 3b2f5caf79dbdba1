"""``spanqa ingest`` and ``spanqa reindex``: fill the index from files, rebuild it from the catalog."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from spanqa.cli._errors import UserError, friendly_errors, settings_from
from spanqa.cli._options import file_filter_options, json_option
from spanqa.cli._output import ProgressLines, console, print_json, progress_bar, say_waiting
from spanqa.runtime import Runtime

#: Seconds per vector of Edge's HNSW build on 2 cores (36 s for 60,000 vectors of 384 dimensions): for the
#: estimate shown while it runs.
HNSW_BUILD_S_PER_VECTOR = 0.0006

if TYPE_CHECKING:
    from spanqa.ingest.job import IngestJob
    from spanqa.ingest.report import IngestReport, Progress
    from spanqa.settings import Settings
    from spanqa.types import Job
    from spanqa.workers.client import ServerClient


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
    from spanqa.workers.client import enqueue_ingest

    if background:
        from spanqa.workers.client import require_broker

        require_broker(settings, "--background")
        job = enqueue_ingest(settings, _absolute(paths), prune=prune, include=include, exclude=exclude)
        print_queued(job, as_json=as_json)
        return
    with Runtime(settings, on_wait=say_waiting) as runtime:
        from spanqa.workers.client import StoreGateway

        gateway = StoreGateway(runtime)
        if gateway.held_elsewhere():
            if gateway.server is None:  # a worker holds the store: it runs the ingest, this process follows
                absolute = _absolute(paths)
                job = enqueue_ingest(settings, absolute, prune=prune, include=include, exclude=exclude)
                if not as_json:
                    click.echo(f"a worker holds the store: it runs this ingest as job {job.id}", err=True)
                ctx.exit(_follow_job(settings, job, as_json=as_json))
            report, kept, found_any = _run_on_server(
                gateway.server, paths, prune, include, exclude, quiet=as_json
            )
        else:
            job_runner = runtime.ingest_job()
            found = job_runner.discover(paths, include=include, exclude=exclude)
            report = _run_with_progress(job_runner, paths, prune, include, exclude, len(found), quiet=as_json)
            kept = 0 if prune else len(job_runner.vanished(paths))
            found_any = bool(found)
    if as_json:
        print_json(report.to_dict())
    else:
        verbose = (ctx.find_root().obj or {}).get("verbose", 0)
        _print_report(report, found_any=found_any or prune, vanished_kept=kept, name_skipped=verbose > 0)
    ctx.exit(report.exit_code)


def _absolute(paths: tuple[str, ...]) -> list[str]:
    """The paths as another process (a worker, a server) finds them; a usage error for a missing one."""
    absolute = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists():
            raise UserError(f"no such file or folder: {raw}")
        absolute.append(str(path.absolute()))
    return absolute


def _run_on_server(
    server: ServerClient, paths: Any, prune: bool, include: Any, exclude: Any, *, quiet: bool
) -> tuple[IngestReport, int, bool]:
    """Ingest through the running `spanqa serve` that holds the store, showing its progress here."""
    from spanqa.ingest.report import IngestReport, Progress
    from spanqa.workers.client import INTERNAL_INGEST

    payload = {"paths": _absolute(paths), "prune": prune, "include": list(include), "exclude": list(exclude)}
    if not quiet:
        click.echo(f"ingesting through the spanqa server at {server.url} (it holds the store)", err=True)
    with progress_bar("ingest", fields=_FIELDS, disable=quiet) as progress:
        task = progress.add_task("ingest", total=None, chunks=0, rate=0.0)
        show = _shown_progress(progress, task, quiet=quiet)
        for event in server.stream(INTERNAL_INGEST, payload):
            kind = event.get("event")
            if kind == "waiting" and not quiet:
                click.echo(f"waiting: {event['reason']}", err=True)
            elif kind == "start":
                progress.update(task, total=event["files_total"])
            elif kind == "progress":
                show(Progress(**{key: value for key, value in event.items() if key != "event"}))
            elif kind == "error":
                raise UserError(event["error"])
            elif kind == "report":
                report = IngestReport.from_dict(event["report"])
                return report, int(event["vanished_kept"]), bool(report.outcomes or report.skipped_files)
    raise UserError(f"the spanqa server at {server.url} stopped before the ingest ended (see its log)")


def _follow_job(settings: Settings, job: Job, *, as_json: bool) -> int:
    """Follow a queued ingest until it ends; the exit code a foreground ingest would give."""
    from spanqa.cli.workers import follow_job, print_job
    from spanqa.ingest.catalog import Catalog

    with Catalog(settings.catalog_url) as catalog:
        job = follow_job(catalog, job, quiet=as_json)
    print_job(job, as_json=as_json)
    return 0 if job.state == "done" and not job.failed else 1


def print_queued(job: Job, *, as_json: bool) -> None:
    """Say which job was queued and how to follow it."""
    if as_json:
        print_json({"job_id": job.id, "state": job.state})
    else:
        click.echo(f"queued job {job.id} (follow it with `spanqa jobs {job.id} --watch`)")


def _build_notice(*, quiet: bool) -> Callable[[int], None]:
    """What tells the user an HNSW build has begun: Edge's build reports no progress, so say what it does and
    about how long it takes (a JSON progress line when ``quiet``)."""

    def on_build(vectors: int) -> None:
        eta = vectors * HNSW_BUILD_S_PER_VECTOR
        if quiet:
            ProgressLines("hnsw").update(0, vectors, eta_estimate_s=round(eta, 1))
        else:
            message = f"building the search index (HNSW) over {vectors:,} vectors: about {eta:.0f} s"
            click.echo(message, err=True)

    return on_build


def _run_with_progress(
    job: IngestJob, paths: Any, prune: bool, include: Any, exclude: Any, total: int, *, quiet: bool
) -> IngestReport:
    job.on_build = _build_notice(quiet=quiet)
    with progress_bar("ingest", fields=_FIELDS, disable=quiet or total == 0) as progress:
        task = progress.add_task("ingest", total=total, chunks=0, rate=0.0)
        on_progress = _shown_progress(progress, task, quiet=quiet)
        return job.run(paths, prune=prune, include=include, exclude=exclude, on_progress=on_progress)


#: The ingest bar's columns beside the files done.
_FIELDS = ("files", "{task.fields[chunks]} chunks", "{task.fields[rate]:.1f} chunks/s")


def _shown_progress(progress: Any, task: Any, *, quiet: bool) -> Callable[[Progress], None]:
    """What shows each file's progress: the bar, and JSON lines on stderr when ``quiet`` (``--json``)."""
    lines = ProgressLines("ingest") if quiet else None

    def show(event: Progress) -> None:
        elapsed = max((progress.tasks[0].elapsed or 0.0) - event.load_seconds, 1e-9)
        rate = event.chunks_done / elapsed
        progress.update(task, completed=event.files_done, chunks=event.chunks_done, rate=rate)
        if lines is not None:
            lines.update(
                event.files_done, event.files_total, chunks=event.chunks_done, chunks_per_s=round(rate, 1)
            )

    return show


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
    if report.index_build_note:
        out.print(f"  [yellow]note[/yellow] {report.index_build_note}", highlight=False)


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
    from spanqa.ingest.reindex import reindex as run_reindex

    settings = settings_from(ctx)
    if retriever_model:
        settings = settings.replace(retriever_model=retriever_model)
    if background:
        from spanqa.workers.client import enqueue_reindex

        print_queued(enqueue_reindex(settings, settings.retriever_model), as_json=as_json)
        return
    with Runtime(settings, on_wait=say_waiting) as runtime:
        report = run_reindex(
            catalog=runtime.catalog,
            encoder=runtime.encoder,
            index=runtime.index,
            hnsw_build_at=settings.hnsw_build_at,
            on_build=_build_notice(quiet=as_json),
        )
    data = {
        "previous": report.previous.collection if report.previous else None,
        "current": report.current.collection,
        "model": report.current.model_name,
        "chunks": report.chunks,
        "seconds": round(report.seconds, 2),
        "index_build_seconds": round(report.index_build_seconds, 2),
        "index_build_note": report.index_build_note,
    }
    if as_json:
        print_json(data)
    else:
        click.echo(
            f"re-indexed {report.chunks} chunks into {report.current.collection} in {report.seconds:.1f}s"
        )
        if report.index_build_note:
            click.echo(f"  note: {report.index_build_note}")
        if retriever_model:
            click.echo(f"now set SPANQA_RETRIEVER_MODEL={retriever_model} so questions use the same model")
