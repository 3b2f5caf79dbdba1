"""The `spanqa` command: parse, run a job, print. Only this module knows Click."""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from spanqa import __version__
from spanqa.settings import Settings, SettingsError

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK, EXIT_FAILED_FILES, EXIT_USAGE = 0, 1, 2

# Model libraries print load reports and progress bars that mean nothing to a user asking a question.
for _name, _value in {
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_DISABLE_TELEMETRY": "1",
}.items():
    os.environ.setdefault(_name, _value)


class UserError(click.ClickException):
    """A one-line error for the user; exit code 2."""

    exit_code = EXIT_USAGE

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def _known_errors() -> tuple[type[BaseException], ...]:
    """Errors that carry a user-facing one-line message (imported lazily: some modules are heavy)."""
    from ingest.catalog import CatalogError
    from ingest.job import IngestError
    from reader.model import ReaderLoadError
    from retriever.encoder import EncoderLoadError
    from retriever.index import VectorIndexError
    from spanqa.pipeline import EmptyIndexError

    return (
        SettingsError,
        CatalogError,
        IngestError,
        ReaderLoadError,
        EncoderLoadError,
        VectorIndexError,
        EmptyIndexError,
        FileNotFoundError,
    )


def friendly_errors(func: F) -> F:
    """Turn known errors into one-line messages; a traceback only with --debug."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        debug = bool(ctx.find_root().obj and ctx.find_root().obj.get("debug"))
        try:
            return func(*args, **kwargs)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)
        except Exception as exc:
            if debug:
                raise
            if isinstance(exc, _known_errors()):
                raise UserError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
            raise UserError(f"unexpected {type(exc).__name__}: {exc} (run with --debug for details)") from exc

    return wrapper  # type: ignore[return-value]


def settings_from(ctx: click.Context) -> Settings:
    obj = ctx.find_root().obj or {}
    settings = obj.get("settings")
    if settings is None:
        try:
            settings = Settings.load(config_file=obj.get("config"), data_dir=obj.get("data_dir"))
        except SettingsError as exc:
            raise UserError(str(exc)) from exc
        obj["settings"] = settings
    return settings


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="spanqa")
@click.option("--config", type=click.Path(dir_okay=False), help="A spanqa.toml file (default ./spanqa.toml).")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    help="Where the catalog and index live (default ./.spanqa).",
)
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug logs).")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def main(ctx: click.Context, config: str | None, data_dir: str | None, verbose: int, debug: bool) -> None:
    """Ask questions of your own documents; get exact spans with file, page and offsets."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    ctx.obj = {"config": config, "data_dir": data_dir, "debug": debug}


# ingest --------------------------------------------------------------------------------------------------


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--prune", is_flag=True, help="Drop documents whose files have vanished from these folders.")
@click.option("--include", multiple=True, metavar="GLOB", help="Only files matching this glob (repeatable).")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip files matching this glob (repeatable).")
@click.option("--background", is_flag=True, help="Enqueue the work for `spanqa worker` and print a job id.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
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
    """Load, chunk and embed every file under PATHS (new and changed files only)."""
    from ingest.job import PathNotFoundError
    from spanqa.runtime import Runtime

    settings = settings_from(ctx)
    if background:
        _enqueue_ingest(settings, paths, prune, include, exclude, as_json=as_json)
        return
    with Runtime(settings) as runtime:
        job = runtime.ingest_job()
        try:
            found = job.discover(paths, include=include, exclude=exclude)
        except PathNotFoundError as exc:
            raise UserError(str(exc)) from exc
        report = _run_ingest_with_progress(job, paths, prune, include, exclude, len(found), quiet=as_json)
    if as_json:
        print_json(
            {
                "summary": report.summary(),
                "chunks_embedded": report.chunks_embedded,
                "seconds": round(report.seconds, 3),
                "orphans_removed": report.orphans_removed,
                "files": [o.__dict__ for o in report.outcomes],
            }
        )
    else:
        _print_ingest_report(report, found_any=bool(found) or prune)
    ctx.exit(report.exit_code)


def _require_broker(settings: Settings, what: str) -> None:
    if not settings.broker_url:
        raise UserError(f"{what} needs a broker: set SPANQA_BROKER_URL (e.g. redis://127.0.0.1:6379/0)")


def _enqueue(settings: Settings, kind: str, task: str, arguments: dict[str, Any], *, as_json: bool) -> None:
    """Record a job in the catalog and send its task to the workers, with the job id first."""
    from ingest.catalog import Catalog
    from workers.app import create_app

    _require_broker(settings, "--background")
    catalog = Catalog(settings.catalog_url)
    try:
        job = catalog.create_job(kind, arguments)
    finally:
        catalog.close()
    create_app(settings).tasks[task].delay(job.id, *arguments.values())
    if as_json:
        print_json({"job_id": job.id, "state": job.state})
    else:
        click.echo(f"queued job {job.id} (follow it with `spanqa jobs {job.id} --watch`)")


def _enqueue_ingest(
    settings: Settings, paths: tuple[str, ...], prune: bool, include: Any, exclude: Any, *, as_json: bool
) -> None:
    _require_broker(settings, "--background")
    absolute = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists():
            raise UserError(f"no such file or folder: {raw}")
        absolute.append(str(path.absolute()))
    arguments = {"paths": absolute, "prune": prune, "include": list(include), "exclude": list(exclude)}
    _enqueue(settings, "ingest", "spanqa.ingest_path", arguments, as_json=as_json)


def _run_ingest_with_progress(
    job: Any, paths: Any, prune: bool, include: Any, exclude: Any, total: int, *, quiet: bool
) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = _console(stderr=True)
    if quiet or not console.is_terminal or total == 0:
        return job.run(paths, prune=prune, include=include, exclude=exclude)
    columns = (
        TextColumn("[bold]ingest"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("files"),
        TextColumn("{task.fields[chunks]} chunks"),
        TextColumn("{task.fields[rate]:.1f} chunks/s"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("ingest", total=total, chunks=0, rate=0.0)

        def on_progress(event: Any) -> None:
            elapsed = progress.tasks[0].elapsed or 1e-9
            progress.update(
                task, completed=event.files_done, chunks=event.chunks_done, rate=event.chunks_done / elapsed
            )

        return job.run(paths, prune=prune, include=include, exclude=exclude, on_progress=on_progress)


def _print_ingest_report(report: Any, *, found_any: bool) -> None:
    console = _console()
    if not found_any:
        console.print("nothing to ingest: no supported files found")
        return
    s = report.summary()
    rate = report.chunks_embedded / report.seconds if report.seconds > 0 else 0.0
    console.print(
        f"{s['new']} new, {s['changed']} changed, {s['unchanged']} unchanged, {s['failed']} failed"
        + (f", {s['pruned']} pruned" if s["pruned"] else "")
        + f" · {report.chunks_embedded} chunks embedded in {report.seconds:.1f}s ({rate:.1f} chunks/s)"
    )
    for outcome in report.failures:
        console.print(f"  [red]failed[/red] {outcome.path}: {outcome.error}")
    if report.orphans_removed:
        console.print(f"  removed {report.orphans_removed} orphan points left by an interrupted run")


# search --------------------------------------------------------------------------------------------------


@main.command()
@click.argument("query")
@click.option(
    "-k", "--top-k", default=5, show_default=True, type=click.IntRange(1, 1000), help="Passages to show."
)
@click.option("--path", "path_glob", metavar="GLOB", help="Only documents whose path matches this glob.")
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")
@click.pass_context
@friendly_errors
def search(ctx: click.Context, query: str, top_k: int, path_glob: str | None, as_json: bool) -> None:
    """Find the passages nearest to QUERY (retriever only)."""
    from spanqa.runtime import Runtime

    if not query.strip():
        raise UserError("the query is empty")
    with Runtime(settings_from(ctx)) as runtime:
        result = _StoreGateway(runtime).search(query, top_k=top_k, path_glob=path_glob)
    if as_json:
        print_json(
            {
                "query": query,
                "passages": [_passage_dict(p) for p in result.passages],
                "timings_ms": {k: round(v * 1000, 2) for k, v in result.timings.items()},
            }
        )
        return
    console = _console()
    if not result.passages:
        console.print("no passages found")
        return
    for p in result.passages:
        where = f"{p.path}" + (f":{p.page}" if p.page is not None else "")
        console.print(
            f"[bold]{p.rank}.[/bold] {p.score:.3f}  [cyan]{where}[/cyan]  chars {p.char_start}-{p.char_end}"
        )
        if p.heading:
            console.print("   " + _shorten(p.heading, 200), style="dim", markup=False)
        console.print("   " + _shorten(p.text, 300), markup=False)


def _passage_dict(p: Any) -> dict[str, Any]:
    return {
        "rank": p.rank,
        "score": round(p.score, 6),
        "path": p.path,
        "page": p.page,
        "char_start": p.char_start,
        "char_end": p.char_end,
        "document_id": p.document_id,
        "chunk_id": p.chunk_id,
        "heading": p.heading,
        "text": p.text,
    }


def _shorten(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# ask -----------------------------------------------------------------------------------------------------


@main.command()
@click.argument("question")
@click.option(
    "-k", "--answers", type=click.IntRange(1, 50), help="Answers to show (default: the answers setting)."
)
@click.option(
    "--passages",
    type=click.IntRange(1, 200),
    help="Passages the reader reads (default: the passages setting).",
)
@click.option("--path", "path_glob", metavar="GLOB", help="Only documents whose path matches this glob.")
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON (one object per question).")
@click.pass_context
@friendly_errors
def ask(
    ctx: click.Context,
    question: str,
    answers: int | None,
    passages: int | None,
    path_glob: str | None,
    as_json: bool,
) -> None:
    """Answer QUESTION with exact spans of your documents ('-' reads one question per line from stdin)."""
    from spanqa.runtime import Runtime

    settings = settings_from(ctx)
    with Runtime(settings) as runtime:
        gateway = _StoreGateway(runtime)
        options = {"passages": passages, "answers": answers, "path_glob": path_glob}
        if question != "-":
            if not question.strip():
                raise UserError("the question is empty")
            _print_ask(gateway.ask(question, **options), as_json=as_json)
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
            _print_ask(gateway.ask(line, **options), as_json=as_json, compact_json=True)


class _StoreGateway:
    """Runs ask and search here, or on the worker that owns the embedded store when one holds it."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self.on_worker = False
        self._client: Any = None

    def warm_up_reader(self) -> None:
        if not self._use_worker_if_store_is_held():
            self.runtime.reader.warm_up()

    def ask(self, question: str, **options: Any) -> Any:
        from spanqa import pipeline

        if not self._use_worker_if_store_is_held():
            return pipeline.ask(self.runtime, question, **options)
        data = self._call(
            "spanqa.ask", question, options["passages"], options["answers"], options["path_glob"]
        )
        return pipeline.AskResult.from_dict(data)

    def search(self, query: str, *, top_k: int, path_glob: str | None) -> Any:
        from spanqa import pipeline

        if not self._use_worker_if_store_is_held():
            return pipeline.search(self.runtime, query, top_k=top_k, path_glob=path_glob)
        return pipeline.SearchResult.from_dict(self._call("spanqa.search", query, top_k, path_glob))

    def _use_worker_if_store_is_held(self) -> bool:
        from retriever.index import VectorIndexInUseError

        if not self.on_worker:
            try:
                self.runtime.index  # noqa: B018 - opening it tells whether another process holds the store
            except VectorIndexInUseError as exc:
                if self.runtime.settings.broker_url is None:
                    raise
                logger.info("%s; asking the worker", exc)
                self.on_worker = True
        return self.on_worker

    def _call(self, task: str, *args: Any) -> dict[str, Any]:
        from workers.client import WorkerClient, WorkerUnavailableError

        if self._client is None:
            self._client = WorkerClient(self.runtime.settings)
        try:
            result: dict[str, Any] = self._client.call(task, *args)
            return result
        except WorkerUnavailableError as exc:
            raise UserError(f"the vector store is held by another process and {exc}") from exc


def _print_ask(result: Any, *, as_json: bool, compact_json: bool = False) -> None:
    if as_json:
        data = {
            "question": result.question,
            "abstained": result.abstained,
            "answers": [a.to_dict() for a in result.answers],
            "passages": [_passage_dict(p) for p in result.passages],
            "timings_ms": {k: round(v * 1000, 2) for k, v in result.timings.items()},
        }
        if compact_json:
            click.echo(json.dumps(data, ensure_ascii=False, default=str))
        else:
            print_json(data)
        return
    from rich.text import Text

    console = _console()
    if not result.passages:
        console.print("no answer found: no passages to read")
        return
    if result.abstained:
        console.print("[yellow]no answer found[/yellow]; the closest passages:")
        for p in result.passages[:3]:
            where = p.path + (f":{p.page}" if p.page is not None else "")
            console.print(f"  {p.score:.3f}  [cyan]{where}[/cyan]  chars {p.char_start}-{p.char_end}")
            console.print("     " + _shorten(p.text, 200), markup=False)
        return
    for rank, a in enumerate(result.answers, 1):
        where = a.path + (f":{a.page}" if a.page is not None else "")
        header = Text(f"{rank}. ", style="bold")
        header.append(a.text, style="bold green")
        header.append(f"   score {a.score:.2f}")
        console.print(header)
        console.print(f"   [cyan]{where}[/cyan]  chars {a.char_start}-{a.char_end}")
        start = a.char_start - a.context_start
        end = start + len(a.text)
        context = Text("   ")
        context.append(a.context[:start])
        context.append(a.context[start:end], style="bold reverse")
        context.append(a.context[end:])
        console.print(context)
    timings = " · ".join(f"{k} {v * 1000:.0f} ms" for k, v in result.timings.items())
    console.print(f"[dim]{timings}[/dim]")


# reader --------------------------------------------------------------------------------------------------


@main.group("reader")
def reader_group() -> None:
    """Train and evaluate span-extraction readers."""


@reader_group.command("train")
@click.option(
    "--train",
    "train_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="SQuAD-format JSON (v1.1 or v2.0).",
)
@click.option(
    "--init", "init", help="Encoder to start from: hub name or path (default: the packaged all-MiniLM-L6-v2)."
)
@click.option(
    "--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Where checkpoints go."
)
@click.option("--epochs", type=float, default=2.0, show_default=True)
@click.option("--max-seq-len", type=int, default=256, show_default=True)
@click.option(
    "--stride", type=int, default=96, show_default=True, help="Tokens shared by consecutive windows."
)
@click.option("--batch-size", type=int, default=32, show_default=True)
@click.option("--lr", type=float, default=1e-4, show_default=True)
@click.option(
    "--warmup",
    type=float,
    default=0.05,
    show_default=True,
    help="Warm-up: a fraction of steps (<1) or steps.",
)
@click.option("--max-steps", type=int, help="Total optimizer steps (overrides --epochs).")
@click.option(
    "--save-every", type=int, default=200, show_default=True, help="Checkpoint (and evaluate) every N steps."
)
@click.option(
    "--eval",
    "eval_file",
    type=click.Path(exists=True, dir_okay=False),
    help="SQuAD-format JSON scored at each checkpoint.",
)
@click.option(
    "--eval-limit", type=int, default=600, show_default=True, help="Questions of --eval used at checkpoints."
)
@click.option(
    "--negatives",
    type=float,
    default=0.2,
    show_default=True,
    help="Unanswerable pairs added per question (teaches abstention).",
)
@click.option(
    "--exclude-ids", type=click.Path(exists=True, dir_okay=False), help="File of question ids to leave out."
)
@click.option("--time-limit", type=float, help="Minutes; then checkpoint and stop (continue with --resume).")
@click.option("--threads", type=int, default=0, help="torch threads (0: torch's default).")
@click.option(
    "--device",
    default="auto",
    show_default=True,
    help="torch device: auto (a GPU where torch sees one, with bf16 autocast), cpu, cuda, cuda:1, ...",
)
@click.option("--seed", type=int, default=42, show_default=True)
@click.option("--resume", is_flag=True, help="Carry on from the checkpoint in --out.")
@click.pass_context
@friendly_errors
def reader_train(ctx: click.Context, **options: Any) -> None:
    """Fine-tune an encoder for span extraction on SQuAD-format data."""
    from reader.training import TrainConfig, resolve_training_device, train
    from retriever.encoder import resolve_encoder_model

    try:
        resolve_training_device(options["device"])
    except (ValueError, RuntimeError) as exc:  # torch.device("gpu") raises RuntimeError
        raise click.BadParameter(str(exc).splitlines()[0], param_hint="--device") from exc
    init = options["init"] or resolve_encoder_model("sentence-transformers/all-MiniLM-L6-v2")
    config = TrainConfig(
        train_file=options["train_file"],
        init=init,
        out_dir=options["out_dir"],
        epochs=options["epochs"],
        max_seq_len=options["max_seq_len"],
        stride=options["stride"],
        batch_size=options["batch_size"],
        lr=options["lr"],
        warmup=options["warmup"],
        max_steps=options["max_steps"],
        save_every=options["save_every"],
        eval_file=options["eval_file"],
        eval_limit=options["eval_limit"],
        negatives=options["negatives"],
        exclude_ids_file=options["exclude_ids"],
        time_limit_minutes=options["time_limit"],
        threads=options["threads"],
        seed=options["seed"],
        device=options["device"],
    )
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = _console(stderr=True)
    columns = (
        TextColumn("[bold]train"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("steps · loss {task.fields[loss]:.3f} · {task.fields[rate]:.1f} windows/s"),
        TimeRemainingColumn(),
    )
    if not console.is_terminal:
        # Runs last hours under nohup or a scheduler: without a bar, step lines are the only sign of life.
        logging.getLogger("reader.training").setLevel(logging.INFO)
    with Progress(*columns, console=console, disable=not console.is_terminal) as progress:
        task = progress.add_task("train", total=None, loss=float("nan"), rate=0.0)

        def on_step(step: int, total: int, loss: float, rate: float) -> None:
            progress.update(task, completed=step, total=total, loss=loss, rate=rate)

        result = train(config, resume=options["resume"], on_step=on_step)
    state = "finished" if result.finished else "stopped (continue with --resume)"
    click.echo(f"{state} at step {result.global_step}/{result.total_steps}, {result.windows_seen} windows")
    for record in result.history[-5:]:
        click.echo(json.dumps(record))


@reader_group.command("export")
@click.argument("source", type=click.Path(exists=True, file_okay=False))
@click.argument("destination", type=click.Path(file_okay=False))
@click.option("--fp32", is_flag=True, help="Keep float32 weights (default: float16, half the size).")
@click.pass_context
@friendly_errors
def reader_export(ctx: click.Context, source: str, destination: str, fp32: bool) -> None:
    """Copy a trained reader (e.g. OUT/best) for shipping: safetensors weights and tokenizer files."""
    from reader.training import export_model

    path = export_model(source, destination, half=not fp32)
    size = sum(f.stat().st_size for f in path.iterdir() if f.is_file())
    click.echo(f"exported {source} to {path} ({size / 1e6:.1f} MB)")


@reader_group.command("eval")
@click.option(
    "--data", required=True, type=click.Path(exists=True, dir_okay=False), help="SQuAD-format JSON."
)
@click.option("--model", help="Reader to evaluate: name or path (default: the reader setting).")
@click.option("--limit", type=click.IntRange(1), help="Only the first N questions.")
@click.option(
    "--threshold",
    type=float,
    help="Abstain below this margin (default: no_answer_threshold for v2.0 data; never for v1.1).",
)
@click.option(
    "--thresholds",
    "table_thresholds",
    callback=lambda ctx, param, value: _parse_thresholds(value),
    help="Also score these abstention thresholds from one pass, e.g. none,0,3,5,8 (none: never abstain).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the metrics as JSON.")
@click.pass_context
@friendly_errors
def reader_eval(
    ctx: click.Context,
    data: str,
    model: str | None,
    limit: int | None,
    threshold: float | None,
    table_thresholds: list[float | None],
    as_json: bool,
) -> None:
    """Exact match and F1 (official SQuAD scoring) with the gold paragraph given."""
    from reader.evaluation import evaluate_reader
    from reader.reader import ExtractiveReader
    from reader.squad import SquadFormatError, load_squad

    settings = settings_from(ctx)
    if model:
        settings = settings.replace(reader_model=model)
    try:
        examples = load_squad(data)
    except SquadFormatError as exc:
        raise UserError(str(exc)) from exc
    if limit:
        examples = examples[:limit]
    has_unanswerable = any(ex.is_impossible for ex in examples)
    if threshold is None and has_unanswerable:
        threshold = settings.no_answer_threshold
    reader = ExtractiveReader.from_settings(settings)
    reader.warm_up()
    from rich.progress import Progress

    console = _console(stderr=True)
    with Progress(console=console, disable=as_json or not console.is_terminal, transient=True) as progress:
        task = progress.add_task("eval", total=len(examples))
        metrics = evaluate_reader(
            reader,
            examples,
            no_answer_threshold=threshold,
            thresholds=table_thresholds,
            on_progress=lambda n: progress.advance(task, n),
        )
    metrics["model"] = settings.reader_model
    metrics["precision"] = reader.loaded_precision
    metrics["data"] = data
    metrics["threshold"] = threshold
    if as_json:
        print_json(metrics)
        return
    table = metrics.pop("threshold_table", None)
    for key, value in metrics.items():
        click.echo(f"{key:<16}{value:.2f}" if isinstance(value, float) else f"{key:<16}{value}")
    if table:
        from rich.table import Table

        names = ("threshold", "exact_match", "f1", "HasAns_f1", "NoAns_exact", "answered")
        columns = [key for key in names if key in table[0]]
        rendered = Table(*columns)
        for row in table:
            rendered.add_row(*("never" if row[key] is None else f"{row[key]:.2f}" for key in columns))
        _console().print(rendered)


def _parse_thresholds(value: str | None) -> list[float | None]:
    """``"none,0,3.5"`` -> ``[None, 0.0, 3.5]``; a word that is neither is a usage error."""
    if not value:
        return []
    thresholds: list[float | None] = []
    for word in value.split(","):
        word = word.strip().lower()
        if word in ("none", "never"):
            thresholds.append(None)
            continue
        try:
            thresholds.append(float(word))
        except ValueError:
            raise click.BadParameter(
                f"{word!r} is not a number or 'none'", param_hint="--thresholds"
            ) from None
    return thresholds


# workers -------------------------------------------------------------------------------------------------


@main.command()
@click.option(
    "--concurrency", type=click.IntRange(1, 64), default=1, show_default=True, help="Worker processes."
)
@click.option(
    "--queues",
    default="spanqa.ask,spanqa",  # workers.app.DEFAULT_WORKER_QUEUES: questions first
    show_default=True,
    help="Comma-separated queues to consume, in priority order.",
)
@click.option("--loglevel", default="INFO", show_default=True)
@click.pass_context
@friendly_errors
def worker(ctx: click.Context, concurrency: int, queues: str, loglevel: str) -> None:
    """Run Celery workers that ingest, delete and re-index in the background."""
    from workers.app import create_app

    settings = settings_from(ctx)
    _require_broker(settings, "spanqa worker")
    if settings.qdrant_url is None and concurrency > 1:
        raise UserError(
            "the embedded vector store allows one process: use --concurrency 1, "
            "or set SPANQA_QDRANT_URL to a Qdrant server"
        )
    app = create_app(settings)
    app.worker_main(["worker", f"--concurrency={concurrency}", "-Q", queues, f"--loglevel={loglevel}"])


@main.command()
@click.option("--loglevel", default="INFO", show_default=True)
@click.pass_context
@friendly_errors
def beat(ctx: click.Context, loglevel: str) -> None:
    """Run the scheduler that sweeps watched folders every sweep_interval_s seconds."""
    from workers.app import create_app

    settings = settings_from(ctx)
    _require_broker(settings, "spanqa beat")
    create_app(settings).Beat(loglevel=loglevel).run()


@main.command()
@click.argument("path", required=False)
@click.option("--include", multiple=True, metavar="GLOB", help="Only files matching this glob (repeatable).")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip files matching this glob (repeatable).")
@click.option("--remove", is_flag=True, help="Stop watching PATH.")
@click.option("--json", "as_json", is_flag=True, help="Print the watched folders as JSON.")
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
    """Register PATH for the sweeper (`spanqa beat`); with no PATH, list the watched folders."""
    from ingest.catalog import Catalog

    catalog = Catalog(settings_from(ctx).catalog_url)
    try:
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
            click.echo(f"watching {folder}")
            return
        folders = catalog.watched_folders()
    finally:
        catalog.close()
    if as_json:
        print_json(folders)
    elif not folders:
        click.echo("no watched folders")
    else:
        for item in folders:
            click.echo(item["path"])


@main.command()
@click.argument("job_id", required=False)
@click.option(
    "--watch", "follow", is_flag=True, help="Follow the job with a live progress bar until it ends."
)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_context
@friendly_errors
def jobs(ctx: click.Context, job_id: str | None, follow: bool, as_json: bool) -> None:
    """Show background jobs (or one job) with state and progress."""
    from ingest.catalog import Catalog

    catalog = Catalog(settings_from(ctx).catalog_url)
    try:
        if job_id is None:
            listed = catalog.list_jobs()
            if as_json:
                print_json([_job_dict(j) for j in listed])
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
            job = _follow_job(catalog, job)
        if as_json:
            print_json(_job_dict(job))
        else:
            click.echo(
                f"{job.id}  {job.kind} {job.state}: {job.done} done, {job.failed} failed of {job.total}"
                + (f" ({job.error})" if job.error else "")
            )
    finally:
        catalog.close()


def _follow_job(catalog: Any, job: Any) -> Any:
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = _console(stderr=True)
    columns = (
        TextColumn(f"[bold]{job.kind}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[state]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, disable=not console.is_terminal, transient=True) as progress:
        task = progress.add_task(job.kind, total=job.total or None, state=job.state)
        while job.state in {"pending", "running"}:
            progress.update(task, total=job.total or None, completed=job.done + job.failed, state=job.state)
            time.sleep(0.5)
            job = catalog.get_job(job.id)
    return job


def _job_dict(job: Any) -> dict[str, Any]:
    return {
        "id": job.id,
        "kind": job.kind,
        "state": job.state,
        "total": job.total,
        "done": job.done,
        "failed": job.failed,
        "error": job.error,
        "arguments": job.arguments,
        "created_at": job.created_at.isoformat() if job.created_at else None,
        "updated_at": job.updated_at.isoformat() if job.updated_at else None,
    }


@main.command()
@click.option(
    "--retriever-model", help="Rebuild with this retriever model (then set SPANQA_RETRIEVER_MODEL to it)."
)
@click.option("--background", is_flag=True, help="Enqueue the rebuild for `spanqa worker`.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
@friendly_errors
def reindex(ctx: click.Context, retriever_model: str | None, background: bool, as_json: bool) -> None:
    """Rebuild the vector collection from the catalog (blue/green: one atomic switch at the end)."""
    from ingest.reindex import reindex as run_reindex
    from spanqa.runtime import Runtime

    settings = settings_from(ctx)
    if retriever_model:
        settings = settings.replace(retriever_model=retriever_model)
    if background:
        arguments = {"retriever_model": settings.retriever_model}
        _enqueue(settings, "reindex", "spanqa.reindex", arguments, as_json=as_json)
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


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
@friendly_errors
def doctor(ctx: click.Context, as_json: bool) -> None:
    """Put the vector index back in step with the catalog (after a crash or an interrupted rebuild)."""
    from spanqa.runtime import Runtime

    with Runtime(settings_from(ctx)) as runtime:
        job = runtime.ingest_job()
        removed = job.remove_orphans()
        restored = job.restore_missing()
    if as_json:
        print_json({"orphans_removed": removed, "missing_restored": restored})
    elif removed or restored:
        click.echo(f"removed {removed} orphan points, restored {restored} missing points")
    else:
        click.echo("index and catalog agree")


# eval ----------------------------------------------------------------------------------------------------


@main.group("eval")
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
@click.option(
    "--passages", type=click.IntRange(1, 200), help="Passages the reader reads (default: the setting)."
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Write report.json, questions.jsonl and the index here.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the metrics as JSON.")
@click.pass_context
@friendly_errors
def eval_squad(
    ctx: click.Context,
    data: str,
    limit: int | None,
    sample: int | None,
    passages: int | None,
    out_dir: str | None,
    as_json: bool,
) -> None:
    """Open-setting SQuAD: ingest every article of DATA, ask every question, score it."""
    import tempfile

    from reader.squad import SquadFormatError, load_squad
    from spanqa.evaluation import evaluate_squad, write_report
    from spanqa.runtime import Runtime

    settings = settings_from(ctx)
    try:
        load_squad(data)
    except SquadFormatError as exc:
        raise UserError(str(exc)) from exc
    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="spanqa-eval-"))
    work = out / "index"
    if work.exists() and any(work.iterdir()):
        raise UserError(f"{work} is not empty: give a new --out folder")
    eval_settings = settings.replace(data_dir=work, model_cache_dir=settings.model_cache)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = _console(stderr=True)
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with (
        Runtime(eval_settings) as runtime,
        Progress(
            *columns, console=console, disable=as_json or not console.is_terminal, transient=True
        ) as progress,
    ):
        task = progress.add_task("prepare", total=None)

        def on_stage(name: str, total: int) -> None:
            progress.update(task, description=name, total=total if name == "ask" else None, completed=0)

        report = evaluate_squad(
            runtime,
            data,
            limit=limit,
            sample=sample,
            passages=passages,
            on_stage=on_stage,
            on_progress=lambda n: progress.advance(task, n),
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
    table.add_row("abstention rate", f"{m['abstention_rate']:.1f}%")
    for stage, values in m["latency"].items():
        table.add_row(f"{stage} p50 / p95 ms", f"{values['p50_ms']:.0f} / {values['p95_ms']:.0f}")
    table.add_row("ingest chunks/s", f"{m['ingest']['chunks_per_s']:.1f}")
    _console().print(table)
    click.echo(f"report: {metrics_file}\nper question: {questions_file}")


@main.group("db")
def db_group() -> None:
    """The catalog database's schema."""


@db_group.command("upgrade")
@click.option("--json", "as_json", is_flag=True, help="Print the revisions as JSON.")
@click.pass_context
@friendly_errors
def db_upgrade(ctx: click.Context, as_json: bool) -> None:
    """Bring the catalog's schema to this version's (it also happens on first use)."""
    from ingest.catalog import Catalog, make_engine
    from ingest.migrations import current_revision, head_revision, upgrade

    url = settings_from(ctx).catalog_url
    engine = make_engine(url)
    try:
        before = current_revision(engine)
        upgrade(engine)
        after = current_revision(engine)
    finally:
        engine.dispose()
    if as_json:
        print_json({"catalog": Catalog.mask(url), "from": before, "to": after, "head": head_revision()})
    elif before == after:
        click.echo(f"catalog {Catalog.mask(url)} is up to date (revision {after})")
    else:
        click.echo(f"catalog {Catalog.mask(url)} upgraded from {before or 'empty'} to {after}")


# status and docs -----------------------------------------------------------------------------------------


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_context
@friendly_errors
def status(ctx: click.Context, as_json: bool) -> None:
    """Documents, chunks, failed files, index version, models and where data lives."""
    from ingest.catalog import Catalog
    from spanqa.errors import redact_url

    settings = settings_from(ctx)
    catalog = Catalog(settings.catalog_url)
    try:
        counts = catalog.counts()
        active = catalog.active_index()
        failed = [d for d in catalog.list_documents() if d.error]
    finally:
        catalog.close()
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
        },
        "retriever_model": settings.retriever_model,
        "reader_model": settings.reader_model,
        "catalog": Catalog.mask(settings.catalog_url),
        "vector_store": redact_url(settings.qdrant_url)
        if settings.qdrant_url
        else str(settings.qdrant_path.absolute()),
        "data_dir": str(settings.data_dir.absolute()),
    }
    if as_json:
        print_json(data)
        return
    console = _console()
    console.print(
        f"documents     {documents['indexed']} indexed, {documents['failed']} failed, "
        f"{documents['deleted']} deleted"
    )
    console.print(f"chunks        {data['chunks']}")
    if active is None:
        console.print("index         none yet (run `spanqa ingest PATH`)")
    else:
        console.print(
            f"index         v{active.id} {active.collection} ({active.model_name}, {active.dimension}-d)"
        )
    console.print(f"retriever     {settings.retriever_model}")
    console.print(f"reader        {settings.reader_model}")
    console.print(f"catalog       {data['catalog']}")
    console.print(f"vector store  {data['vector_store']}")
    for item in failed_files:
        console.print(f"  [red]{item['status']}[/red] {item['path']}: {item['error']}", markup=True)


@main.group()
def docs() -> None:
    """List, show and remove ingested documents."""


@docs.command("list")
@click.option(
    "--status", "status_filter", type=click.Choice(["indexed", "failed", "deleted"]), help="Only this status."
)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_context
@friendly_errors
def docs_list(ctx: click.Context, status_filter: str | None, as_json: bool) -> None:
    """List documents with status, format, pages and chunks."""
    from ingest.catalog import Catalog
    from spanqa.types import DocumentStatus

    catalog = Catalog(settings_from(ctx).catalog_url)
    try:
        documents = catalog.list_documents(status=DocumentStatus(status_filter) if status_filter else None)
    finally:
        catalog.close()
    if as_json:
        print_json([_document_dict(d) for d in documents])
        return
    from rich.table import Table

    table = Table(show_edge=False)
    for column in ("id", "status", "format", "pages", "chunks", "path"):
        table.add_column(column)
    for d in documents:
        table.add_row(
            d.id[:8], d.status.value, d.format or "-", str(d.page_count or "-"), str(d.num_chunks), d.path
        )
    _console().print(table if documents else "no documents")


@docs.command("show")
@click.argument("reference")
@click.option("--text", "show_text", is_flag=True, help="Print the extracted text too.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_context
@friendly_errors
def docs_show(ctx: click.Context, reference: str, show_text: bool, as_json: bool) -> None:
    """Show one document (by id, id prefix or path) and its chunks."""
    from ingest.catalog import Catalog

    catalog = Catalog(settings_from(ctx).catalog_url)
    try:
        document = _one_document(catalog, reference)
        full = catalog.get_document(document.id)
        chunks = catalog.chunks_of(document.id)
    finally:
        catalog.close()
    assert full is not None
    if as_json:
        data = _document_dict(full)
        data["chunks"] = [
            {
                "id": c.id,
                "ordinal": c.ordinal,
                "char_start": c.char_start,
                "char_end": c.char_end,
                "page": c.page,
            }
            for c in chunks
        ]
        if show_text:
            data["text"] = full.text
        print_json(data)
        return
    console = _console()
    for key, value in _document_dict(full).items():
        console.print(f"{key:<14}{value}", markup=False)
    for c in chunks:
        page = f" p{c.page}" if c.page is not None else ""
        console.print(
            f"  #{c.ordinal}{page} {c.char_start}-{c.char_end}  {_shorten(c.text, 80)}", markup=False
        )
    if show_text:
        console.print(full.text, markup=False)


@docs.command("remove")
@click.argument("references", nargs=-1, required=True)
@click.pass_context
@friendly_errors
def docs_remove(ctx: click.Context, references: tuple[str, ...]) -> None:
    """Remove documents (by id, id prefix or path) from the index."""
    from spanqa.runtime import Runtime

    with Runtime(settings_from(ctx)) as runtime:
        targets = [_one_document(runtime.catalog, ref) for ref in references]
        job = runtime.ingest_job()
        for document in targets:
            job.remove_document(document.id)
            click.echo(f"removed {document.path}")


def _one_document(catalog: Any, reference: str) -> Any:
    candidates = catalog.find_documents(reference)
    if not candidates:
        absolute = str(Path(reference).expanduser().absolute())
        candidates = catalog.find_documents(absolute)
    if not candidates:
        raise UserError(f"no document matches '{reference}' (see `spanqa docs list`)")
    if len(candidates) > 1:
        raise UserError(
            f"'{reference}' matches {len(candidates)} documents; give more of the id or the full path"
        )
    return candidates[0]


def _document_dict(d: Any) -> dict[str, Any]:
    return {
        "id": d.id,
        "path": d.path,
        "relative_path": d.relative_path,
        "status": d.status.value,
        "format": d.format,
        "pages": d.page_count,
        "chunks": d.num_chunks,
        "size": d.size,
        "sha256": d.sha256,
        "error": d.error,
        "updated_at": d.updated_at.isoformat() if d.updated_at else None,
    }


if __name__ == "__main__":
    main()
