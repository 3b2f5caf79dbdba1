"""The ``spanqa`` command: global options, then one command group per module of this package.

Only :mod:`spanqa.cli` knows Click; each module parses its commands' arguments, runs a job of the layers
below and prints. Heavy modules (models, stores) are imported inside the commands that need them.
"""

from __future__ import annotations

import logging
import os

import click

from spanqa import __version__
from spanqa.cli._errors import OneLineUsageErrors
from spanqa.cli.admin import completion, config, db_group, doctor, status
from spanqa.cli.ask import ask, search
from spanqa.cli.docs import docs_group
from spanqa.cli.eval import eval_group
from spanqa.cli.ingest import ingest, reindex
from spanqa.cli.reader import reader_group
from spanqa.cli.retriever import retriever_group
from spanqa.cli.serve import serve
from spanqa.cli.workers import beat, jobs, watch, worker

# Model libraries print load reports and progress bars that mean nothing to a user asking a question.
for _name, _value in {
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_DISABLE_TELEMETRY": "1",
}.items():
    os.environ.setdefault(_name, _value)


@click.group(cls=OneLineUsageErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="spanqa")
@click.option("--config", type=click.Path(dir_okay=False), help="A spanqa.toml file (default ./spanqa.toml).")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    help="Where the catalog and index live (default: the nearest .spanqa here or above, else ./.spanqa).",
)
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug logs).")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def main(ctx: click.Context, config: str | None, data_dir: str | None, verbose: int, debug: bool) -> None:
    """Ask questions of your own documents; get exact spans with file, page and offsets."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    ctx.obj = {"config": config, "data_dir": data_dir, "debug": debug, "verbose": verbose}


for _command in (
    ingest,
    reindex,
    search,
    ask,
    serve,
    docs_group,
    reader_group,
    retriever_group,
    eval_group,
    worker,
    beat,
    watch,
    jobs,
    status,
    doctor,
    db_group,
    config,
    completion,
):
    main.add_command(_command)
