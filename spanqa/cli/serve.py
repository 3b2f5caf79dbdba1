"""``spanqa serve``: answer over HTTP and show answers in their documents, from one warm process."""

from __future__ import annotations

import secrets
import socket

import click

from spanqa.cli._errors import UserError, friendly_errors, settings_from
from spanqa.runtime import Runtime
from spanqa.workers.client import announce_server, withdraw_server

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


@click.command()
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="Address to listen on.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535))
@click.option("--log-level", default="warning", show_default=True, help="uvicorn's log level.")
@click.pass_context
@friendly_errors
def serve(ctx: click.Context, host: str, port: int, log_level: str) -> None:
    """Serve the HTTP API (its schema at /openapi.json) and a web page to ask from (/).

    Listens on 127.0.0.1 unless told otherwise; another address needs SPANQA_API_KEY. POST /ingest reads
    only under SPANQA_SERVE_ROOTS. The process owns the embedded store and keeps both models loaded.
    """
    import uvicorn

    from spanqa.server.app import create_app
    from spanqa.server.security import check_bind

    settings = settings_from(ctx)
    check_bind(host, settings)
    listening = _listen(host, port)
    with Runtime(settings, holds_store=True) as runtime, listening:
        runtime.index  # noqa: B018 - opening the store now: "in use" is a one-line error, not a server crash
        token = secrets.token_urlsafe(32)
        app = create_app(runtime, internal_token=token)
        bound = listening.getsockname()[1]
        where = f"http://{host if ':' not in host else f'[{host}]'}:{bound}/"
        click.echo(f"spanqa serving {settings.data_dir} on {where} (Ctrl+C to stop)", err=True)
        config = uvicorn.Config(app, log_level=log_level, access_log=False)
        # Other spanqa commands on this data folder find the server here and ask through it.
        local = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        address = f"http://{local if ':' not in local else f'[{local}]'}:{bound}"
        announce_server(settings.server_file, address, token)
        try:
            uvicorn.Server(config).run(sockets=[listening])
        finally:
            withdraw_server(settings.server_file)


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (before any model loads): a taken port is a one-line error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((host, port))
    except OSError as exc:  # the port is taken, or the address is not this machine's
        listening.close()
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return listening
