"""``spanqa docs``: list, show and remove ingested documents."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import click

from spanqa.cli._errors import EXIT_FAILED_FILES, UserError, friendly_errors, settings_from
from spanqa.cli._options import json_option
from spanqa.cli._output import console, print_json, say_waiting, shorten
from spanqa.records import document_detail, document_dict
from spanqa.runtime import Runtime, require_data

_ID_PREFIX = re.compile(r"^[0-9a-f-]+$")

if TYPE_CHECKING:
    from spanqa.ingest.catalog import Catalog
    from spanqa.types import Document


@click.group("docs")
def docs_group() -> None:
    """List, show and remove ingested documents."""


@docs_group.command("list")
@click.option(
    "--status", "status_filter", type=click.Choice(["indexed", "failed", "deleted"]), help="Only this status."
)
@json_option()
@click.pass_context
@friendly_errors
def docs_list(ctx: click.Context, status_filter: str | None, as_json: bool) -> None:
    """List documents with status, format, pages and chunks."""
    from spanqa.ingest.catalog import Catalog
    from spanqa.types import DocumentStatus

    settings = settings_from(ctx)
    require_data(settings)
    with Catalog(settings.catalog_url) as catalog:
        documents = catalog.list_documents(status=DocumentStatus(status_filter) if status_filter else None)
    if as_json:
        print_json([document_dict(d) for d in documents])
        return
    from rich.table import Table

    table = Table(show_edge=False)
    for column in ("id", "status", "format", "pages", "chunks", "path"):
        table.add_column(column)
    for d in documents:
        table.add_row(
            d.id[:8], d.status.value, d.format or "-", str(d.page_count or "-"), str(d.num_chunks), d.path
        )
    console().print(table if documents else "no documents")


@docs_group.command("show")
@click.argument("reference")
@click.option("--text", "show_text", is_flag=True, help="Print the extracted text too.")
@json_option()
@click.pass_context
@friendly_errors
def docs_show(ctx: click.Context, reference: str, show_text: bool, as_json: bool) -> None:
    """Show one document (by id, id prefix or path) and its chunks."""
    from spanqa.ingest.catalog import Catalog

    settings = settings_from(ctx)
    require_data(settings)
    with Catalog(settings.catalog_url) as catalog:
        document = one_document(catalog, reference)
        full = catalog.get_document(document.id)
        chunks = catalog.chunks_of(document.id)
    if full is None:  # removed between the two reads
        raise UserError(f"no document matches '{reference}' (see `spanqa docs list`)")
    if as_json:
        print_json(document_detail(full, chunks, with_text=show_text))
        return
    out = console()
    for key, value in document_dict(full).items():
        out.print(f"{key:<14}{value}", markup=False)
    for c in chunks:
        page = f" p{c.page}" if c.page is not None else ""
        out.print(f"  #{c.ordinal}{page} {c.char_start}-{c.char_end}  {shorten(c.text, 80)}", markup=False)
    if show_text:
        out.print(full.text, markup=False)


@docs_group.command("remove")
@click.argument("references", nargs=-1, required=True)
@click.pass_context
@friendly_errors
def docs_remove(ctx: click.Context, references: tuple[str, ...]) -> None:
    """Remove documents (by id, id prefix or path) from the index."""
    from spanqa.types import DocumentStatus

    settings = settings_from(ctx)
    require_data(settings)
    already = 0
    with Runtime(settings, on_wait=say_waiting) as runtime:
        from spanqa.workers.client import StoreGateway

        targets = [one_document(runtime.catalog, ref) for ref in references]
        gateway = StoreGateway(runtime)  # a running server or worker removes them when it holds the store
        for document in targets:
            if document.status == DocumentStatus.DELETED:
                click.echo(f"already removed: {document.path}", err=True)
                already += 1
                continue
            gateway.remove(document.id)
            click.echo(f"removed {document.path}")
    if already:
        ctx.exit(EXIT_FAILED_FILES)


def one_document(catalog: Catalog, reference: str) -> Document:
    """The one document that ``reference`` (id, id prefix or path) names; a usage error otherwise."""
    candidates = catalog.find_documents(reference)
    if not candidates:
        absolute = str(Path(reference).expanduser().absolute())
        candidates = catalog.find_documents(absolute)
    if not candidates:
        from spanqa.ingest.catalog import MIN_ID_PREFIX

        if _ID_PREFIX.match(reference) and len(reference) < MIN_ID_PREFIX:
            raise UserError(
                f"'{reference}' is too short for an id prefix: give at least {MIN_ID_PREFIX} characters "
                "(see `spanqa docs list`)"
            )
        raise UserError(f"no document matches '{reference}' (see `spanqa docs list`)")
    if len(candidates) > 1:
        names = ", ".join(f"{d.id[:8]} {d.path}" for d in candidates[:3])
        more = f" and {len(candidates) - 3} more" if len(candidates) > 3 else ""
        raise UserError(
            f"'{reference}' matches {len(candidates)} documents ({names}{more}): "
            "give more of the id or the path"
        )
    return candidates[0]
