"""``spanqa worker``, ``beat``, ``watch`` and ``jobs``: background work and how to follow it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from spanqa.cli._errors import UserError, friendly_errors, settings_from
from spanqa.cli._options import file_filter_options, json_option
from spanqa.cli._output import print_json, progress_bar
from spanqa.records import job_dict
from spanqa.runtime import has_data
from spanqa.workers.names import DEFAULT_WORKER_QUEUES

if TYPE_CHECKING:
    from spanqa.ingest.catalog import Catalog
    from spanqa.settings import Settings
    from spanqa.types import Job

# How often `jobs --watch` looks at the job again.
FOLLOW_POLL_S = 0.5
#: How often the foreground watcher wakes without a change (ms): the first run waits for its first wake.
WATCH_TICK_MS = 300


@click.command()
@click.option(
    "--concurrency", type=click.IntRange(1, 64), default=1, show_default=True, help="Worker processes."
)
@click.option(
    "--queues",
    default=DEFAULT_WORKER_QUEUES,
    show_default=True,
    help="Comma-separated queues to consume, in priority order.",
)
@click.option("--loglevel", default="INFO", show_default=True)
@click.pass_context
@friendly_errors
def worker(ctx: click.Context, concurrency: int, queues: str, loglevel: str) -> None:
    """Run Celery workers that ingest, delete and re-index in the background."""
    from spanqa.workers.app import create_app
    from spanqa.workers.client import require_broker

    settings = settings_from(ctx)
    require_broker(settings, "spanqa worker")
    if settings.qdrant_url is None and concurrency > 1:
        raise UserError(
            "the embedded vector store allows one process: use --concurrency 1, "
            "or set SPANQA_QDRANT_URL to a Qdrant server"
        )
    app = create_app(settings)
    app.worker_main(["worker", f"--concurrency={concurrency}", "-Q", queues, f"--loglevel={loglevel}"])


@click.command()
@click.option("--loglevel", default="INFO", show_default=True)
@click.pass_context
@friendly_errors
def beat(ctx: click.Context, loglevel: str) -> None:
    """Run the scheduler that sweeps watched folders every sweep_interval_s seconds."""
    from spanqa.workers.app import create_app
    from spanqa.workers.client import require_broker

    settings = settings_from(ctx)
    require_broker(settings, "spanqa beat")
    create_app(settings).Beat(loglevel=loglevel).run()


@click.command()
@click.argument("path", required=False)
@file_filter_options
@click.option("--remove", is_flag=True, help="Stop watching PATH.")
@json_option("the watched folders")
@click.pass_context
@friendly_errors
def watch(
    ctx: click.Context,
    path: str | None,
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    remove: bool,
    as_json: bool,
) -> None:
    """Keep PATH indexed as it changes; with no PATH, list the watched folders.

    With a broker (SPANQA_BROKER_URL), PATH is registered for the sweeper (`spanqa beat` and the workers).
    Without one, this process watches PATH itself: new, changed and removed files are ingested and pruned as
    they settle, and Ctrl-C stops it after the run in progress (nothing is left half indexed).
    """
    from spanqa.ingest.catalog import Catalog

    settings = settings_from(ctx)
    if path is None and not has_data(settings):  # listing never creates a data folder
        click.echo("no watched folders")
        return
    with Catalog(settings.catalog_url) as catalog:
        if path is not None:
            folder = Path(path).expanduser().absolute()
            if remove:
                if not catalog.unwatch_folder(str(folder)):
                    raise UserError(f"not watched: {folder}")
                click.echo(f"stopped watching {folder}")
                return
            if not folder.is_dir():
                raise UserError(f"not a folder: {path}")
            catalog.watch_folder(str(folder), include=include, exclude=exclude)
            if settings.broker_url is not None:
                click.echo(
                    f"watching {folder} (swept every {settings.sweep_interval_s:g} s by `spanqa beat`)"
                )
                return
    if path is not None:
        _watch_here(settings, Path(path).expanduser().absolute(), include, exclude)
        return
    with Catalog(settings.catalog_url) as catalog:
        folders = catalog.watched_folders()
    if as_json:
        print_json(folders)
    elif not folders:
        click.echo("no watched folders")
    else:
        for item in folders:
            click.echo(item["path"])


def _watch_here(settings: Settings, folder: Path, include: tuple[str, ...], exclude: tuple[str, ...]) -> None:
    """Watch ``folder`` in this process: ingest and prune on every settled batch of changes."""
    import signal
    import threading

    import watchfiles

    from spanqa.runtime import Runtime

    stop = threading.Event()
    data_dir = settings.data_dir.absolute()

    def interrupted(*_: object) -> None:
        if not stop.is_set():
            click.echo("stopping after the run in progress (Ctrl-C again to force)", err=True)
            stop.set()
        else:
            raise KeyboardInterrupt

    def relevant(_: watchfiles.Change, changed: str) -> bool:
        # The data folder (its catalog changes with every run) and hidden files are never ingested.
        candidate = Path(changed)
        hidden = any(part.startswith(".") for part in candidate.relative_to(folder).parts)
        return not hidden and not candidate.is_relative_to(data_dir)

    def sweep(runtime: Runtime) -> None:
        report = runtime.ingest_job().run([folder], prune=True, include=include, exclude=exclude)
        # The embedded store is held only while a run writes: other spanqa commands may use it in between.
        runtime.release_store()
        s = report.summary()
        if any(s[k] for k in ("new", "changed", "failed", "pruned")):
            stamp = time.strftime("%H:%M:%S")
            click.echo(
                f"{stamp} {s['new']} new, {s['changed']} changed, {s['pruned']} removed, {s['failed']} failed"
            )
            for outcome in report.failures:
                click.echo(f"  failed {outcome.path}: {outcome.error}")

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        with Runtime(settings) as runtime:
            click.echo(f"watching {folder} in this process (no broker set); Ctrl-C stops")
            swept = False
            # The first run starts once the watcher is live (its first timeout), so that a file made while
            # it runs, or just after, is seen; changes during any run are kept for the next.
            for changes in watchfiles.watch(
                folder,
                watch_filter=relevant,
                stop_event=stop,
                raise_interrupt=False,
                yield_on_timeout=True,
                rust_timeout=WATCH_TICK_MS,
            ):
                if changes or not swept:
                    sweep(runtime)
                    swept = True
                if stop.is_set():
                    break
    finally:
        signal.signal(signal.SIGINT, previous)
    click.echo("stopped watching")


@click.command()
@click.argument("job_id", required=False)
@click.option(
    "--watch", "follow", is_flag=True, help="Follow the job with a live progress bar until it ends."
)
@json_option()
@click.pass_context
@friendly_errors
def jobs(ctx: click.Context, job_id: str | None, follow: bool, as_json: bool) -> None:
    """Show background jobs (or one job) with state and progress."""
    from spanqa.ingest.catalog import Catalog

    settings = settings_from(ctx)
    if not has_data(settings):  # looking never creates a data folder
        if job_id is not None:
            raise UserError(f"no job {job_id} (see `spanqa jobs`)")
        if as_json:
            print_json([])
        else:
            click.echo("no jobs")
        return
    with Catalog(settings.catalog_url) as catalog:
        if job_id is None:
            listed = catalog.list_jobs()
            if as_json:
                print_json([job_dict(j) for j in listed])
            elif not listed:
                click.echo("no jobs")
            else:
                for j in listed:
                    click.echo(
                        f"{j.id}  {j.kind:<8} {j.state:<8} {j.done + j.failed}/{j.total} ({j.failed} failed)"
                    )
            return
        job = catalog.get_job(job_id)
        if job is None:
            raise UserError(f"no job {job_id} (see `spanqa jobs`)")
        if follow:
            job = follow_job(catalog, job)
    print_job(job, as_json=as_json)


def print_job(job: Job, *, as_json: bool) -> None:
    """One job: its record with ``--json``, else a line with its state and progress."""
    if as_json:
        print_json(job_dict(job))
    else:
        click.echo(
            f"{job.id}  {job.kind} {job.state}: {job.done} done, {job.failed} failed of {job.total}"
            + (f" ({job.error})" if job.error else "")
        )


def follow_job(catalog: Catalog, job: Job, *, quiet: bool = False) -> Job:
    """Wait for ``job`` to end, with a live progress bar unless ``quiet``; the job as it ended."""
    with progress_bar(job.kind, fields=("{task.fields[state]}",), disable=quiet) as progress:
        task = progress.add_task(job.kind, total=job.total or None, state=job.state)
        while job.state in {"pending", "running"}:
            progress.update(task, total=job.total or None, completed=job.done + job.failed, state=job.state)
            time.sleep(FOLLOW_POLL_S)
            latest = catalog.get_job(job.id)
            if latest is None:  # removed while followed
                break
            job = latest
    return job
