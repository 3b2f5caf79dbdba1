"""``spanqa status``, ``doctor`` and ``db``: where data lives, and keeping catalog and index in step."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from spanqa.cli._errors import UserError, friendly_errors, settings_from
from spanqa.cli._options import json_option
from spanqa.cli._output import console, print_json
from spanqa.runtime import Runtime, has_data, require_data

#: How long `spanqa status` waits for the embedded store held by another process (an ingest lends it as soon
#: as the batch it writes is in; a worker keeps it).
STATUS_STORE_WAIT_S = 5.0

if TYPE_CHECKING:
    from spanqa.settings import Settings


@click.command()
@json_option()
@click.pass_context
@friendly_errors
def status(ctx: click.Context, as_json: bool) -> None:
    """Documents, chunks, failed files, index version, models and where data lives."""
    from spanqa.errors import redact_url
    from spanqa.ingest.catalog import Catalog
    from spanqa.ingest.db import display_url

    settings = settings_from(ctx)
    counts = {"indexed": 0, "failed": 0, "deleted": 0, "chunks": 0}
    active, failed = None, []
    if has_data(settings):  # looking never creates a data folder
        with Catalog(settings.catalog_url) as catalog:
            counts = catalog.counts()
            active = catalog.active_index()
            failed = [d for d in catalog.list_documents() if d.error]
    search_index = _search_index(settings, active.collection) if active is not None else None
    catalog_url = display_url(settings.catalog_url)
    documents = {k: v for k, v in counts.items() if k != "chunks"}
    failed_files = [{"path": d.path, "error": d.error, "status": d.status.value} for d in failed]
    data: dict[str, Any] = {
        "documents": documents,
        "chunks": counts["chunks"],
        "failed_files": failed_files,
        "index": None
        if active is None
        else {
            "collection": active.collection,
            "model": active.model_name,
            "dimension": active.dimension,
            "version": active.id,
            "search": search_index,
        },
        "retriever_model": settings.retriever_model,
        "reader_model": settings.reader_model,
        "catalog": catalog_url,
        "vector_store": redact_url(settings.qdrant_url)
        if settings.qdrant_url
        else str(settings.qdrant_path.absolute()),
        "data_dir": str(settings.data_dir.absolute()),
    }
    if as_json:
        print_json(data)
        return
    out = console()
    out.print(
        f"documents     {documents['indexed']} indexed, {documents['failed']} failed, "
        f"{documents['deleted']} deleted"
    )
    out.print(f"chunks        {data['chunks']}")
    if active is None:
        out.print("index         none yet (run `spanqa ingest PATH`)")
    else:
        out.print(
            f"index         v{active.id} {active.collection} ({active.model_name}, {active.dimension}-d)"
        )
        out.print(f"search        {_describe_search(search_index)}")
    out.print(f"retriever     {settings.retriever_model}")
    out.print(f"reader        {settings.reader_model}")
    out.print(f"catalog       {data['catalog']}")
    out.print(f"vector store  {data['vector_store']}")
    for item in failed_files:
        out.print(f"  [red]{item['status']}[/red] {item['path']}: {item['error']}", markup=True)


def _search_index(settings: Settings, collection: str) -> dict[str, Any]:
    """How many of the collection's vectors their search index covers (Edge: a plain index for a small
    segment, the HNSW graph for a large one once built); ``{"state": "busy"}`` while another process holds
    the embedded store for longer than ``STATUS_STORE_WAIT_S`` (an ingest lends it at once)."""
    from spanqa.retriever.index import VectorIndexError, VectorIndexInUseError
    from spanqa.workers.client import running_server

    # A running server keeps the store: no use waiting for it.
    wait_s = 0.0 if running_server(settings) else min(settings.store_wait_s, STATUS_STORE_WAIT_S)
    try:
        with Runtime(settings) as runtime:
            stats = runtime.wait_for_store(wait_s).stats(collection)
    except VectorIndexInUseError:
        return {"state": "busy"}
    except VectorIndexError:
        return {"state": "unreadable"}
    state = "indexed" if stats.unindexed == 0 else "partly indexed" if stats.indexed else "not indexed"
    return {"state": state, "vectors": stats.points, "indexed": stats.indexed, "segments": stats.segments}


def _describe_search(search: dict[str, Any] | None) -> str:
    if search is None or "vectors" not in search:
        state = (search or {}).get("state", "unknown")
        return "busy: another spanqa process holds the store" if state == "busy" else state
    if search["state"] == "indexed":
        return f"all {search['vectors']:,} vectors indexed (an HNSW graph once a segment is large)"
    return (
        f"{search['indexed']:,} of {search['vectors']:,} vectors indexed, the rest searched exhaustively (an "
        "ingest that leaves hnsw_build_at of them out builds the HNSW graph)"
    )


@click.command()
@json_option("the result")
@click.pass_context
@friendly_errors
def doctor(ctx: click.Context, as_json: bool) -> None:
    """Put the vector index back in step with the catalog (after a crash or an interrupted rebuild)."""
    settings = settings_from(ctx)
    require_data(settings)
    with Runtime(settings) as runtime:
        job = runtime.ingest_job()
        removed = job.remove_orphans()
        restored = job.restore_missing()
    if as_json:
        print_json({"orphans_removed": removed, "missing_restored": restored})
    elif removed or restored:
        click.echo(f"removed {removed} orphan points, restored {restored} missing points")
    else:
        click.echo("index and catalog agree")


@click.group("db")
def db_group() -> None:
    """The catalog database's schema."""


@db_group.command("upgrade")
@json_option("the revisions")
@click.pass_context
@friendly_errors
def db_upgrade(ctx: click.Context, as_json: bool) -> None:
    """Bring the catalog's schema to this version's (it also happens on first use)."""
    from spanqa.ingest.db import display_url, make_engine
    from spanqa.ingest.migrations import current_revision, head_revision, upgrade

    url = settings_from(ctx).catalog_url
    engine = make_engine(url)
    try:
        before = current_revision(engine)
        upgrade(engine)
        after = current_revision(engine)
    finally:
        engine.dispose()
    shown = display_url(url)
    if as_json:
        print_json({"catalog": shown, "from": before, "to": after, "head": head_revision()})
    elif before == after:
        click.echo(f"catalog {shown} is up to date (revision {after})")
    else:
        click.echo(f"catalog {shown} upgraded from {before or 'empty'} to {after}")


@click.command("config")
@json_option("the settings")
@click.pass_context
@friendly_errors
def config(ctx: click.Context, as_json: bool) -> None:
    """Every effective setting and where it came from (default, file, environment, option), secrets masked."""
    from spanqa.errors import SpanqaError, first_line, redact_url
    from spanqa.settings import Settings

    obj = ctx.find_root().obj or {}
    try:
        settings, sources = Settings.load_with_sources(
            config_file=obj.get("config"), data_dir=obj.get("data_dir")
        )
    except SpanqaError as exc:
        raise UserError(first_line(exc)) from exc
    values = settings.public_dict()
    # Where a setting is unset, the value in use (the SQLite file in the data folder, the per-user cache).
    in_use = {"database_url": redact_url(settings.catalog_url), "model_cache_dir": str(settings.model_cache)}
    for name, value in in_use.items():
        if values[name] is None:
            values[name] = value
    if as_json:
        print_json({name: {"value": values[name], "source": sources[name]} for name in values})
        return
    from rich.table import Table

    table = Table("setting", "value", "from", show_edge=False)
    for name, value in values.items():
        table.add_row(name, "" if value is None else str(value), sources[name])
    console().print(table)


@click.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the shell completion script, e.g. `eval "$(spanqa completion bash)"` in ~/.bashrc."""
    from click.shell_completion import get_completion_class

    completer = get_completion_class(shell)
    assert completer is not None  # the choices are the shells Click supports
    root = ctx.find_root().command
    click.echo(completer(root, {}, "spanqa", "_SPANQA_COMPLETE").source())
