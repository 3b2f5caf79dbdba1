"""Tasks run inline (eagerly) when no broker is set: the same code path as a worker."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from spanqa.cli import main
from spanqa.ingest.catalog import Catalog
from spanqa.settings import Settings
from spanqa.types import DocumentStatus
from spanqa.workers import names
from spanqa.workers.app import create_app
from spanqa.workers.state import WorkerState


def test_tasks_run_inline_without_a_broker(settings: Settings, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The Denver Broncos won Super Bowl 50 in Santa Clara. " * 10)
    (docs / "b.txt").write_text("Warsaw is the capital of Poland. " * 10)
    state = WorkerState(settings)
    app = create_app(settings, state)
    assert app.conf.task_always_eager
    catalog = Catalog(settings.catalog_url)
    try:
        job = catalog.create_job("ingest", {"paths": [str(docs)]})
        app.tasks[names.INGEST_PATH].delay(job.id, [str(docs)])
        finished = catalog.get_job(job.id)
        assert finished is not None and (finished.state, finished.total, finished.done) == ("done", 2, 2)
        documents = catalog.list_documents(status=DocumentStatus.INDEXED)
        assert len(documents) == 2
        app.tasks[names.DELETE_DOCUMENT].delay(documents[0].id)
        app.tasks[names.DELETE_DOCUMENT].delay(documents[0].id)  # twice is harmless
        assert len(catalog.list_documents(status=DocumentStatus.INDEXED)) == 1
        job = catalog.create_job("reindex", {})
        result = app.tasks[names.REINDEX].delay(job.id).get()
        assert result["collection"].endswith("__v2") and result["chunks"] == catalog.counts()["chunks"]
        assert catalog.get_job(job.id).state == "done"  # type: ignore[union-attr]
        catalog.watch_folder(str(docs))
        (docs / "b.txt").unlink()
        assert app.tasks[names.SWEEP].delay().get() == 1
        # The sweep keeps the index in step with the folder: b.txt vanished, a.txt is still there.
        assert [Path(d.path).name for d in catalog.list_documents(status=DocumentStatus.INDEXED)] == ["a.txt"]
        assert [Path(d.path).name for d in catalog.list_documents(status=DocumentStatus.DELETED)] == ["b.txt"]
    finally:
        state.close()
        catalog.close()


def test_worker_commands_explain_what_is_missing(settings: Settings) -> None:
    env = {"SPANQA_DATA_DIR": str(settings.data_dir), "SPANQA_CONFIG": "", "SPANQA_BROKER_URL": ""}
    result = CliRunner().invoke(main, ["worker"], env=env)
    assert (
        result.exit_code == 2 and "needs a broker" in result.output and "SPANQA_BROKER_URL" in result.output
    )
    result = CliRunner().invoke(
        main, ["worker", "--concurrency", "2"], env=dict(env, SPANQA_BROKER_URL="redis://x")
    )
    assert result.exit_code == 2 and "one process" in result.output
    result = CliRunner().invoke(main, ["ingest", "--background", "."], env=env)
    assert result.exit_code == 2 and "needs a broker" in result.output


def test_watch_registers_folders(settings: Settings, tmp_path: Path) -> None:
    # With a broker the folder is registered for the sweeper (no connection is needed to register it).
    env = {"SPANQA_DATA_DIR": str(settings.data_dir), "SPANQA_CONFIG": "", "SPANQA_BROKER_URL": "redis://x"}
    runner = CliRunner()
    assert runner.invoke(main, ["watch", str(tmp_path)], env=env).exit_code == 0
    assert str(tmp_path) in runner.invoke(main, ["watch"], env=env).output
    assert runner.invoke(main, ["watch", str(tmp_path / "missing")], env=env).exit_code == 2
    assert runner.invoke(main, ["watch", str(tmp_path), "--remove"], env=env).exit_code == 0
    assert "no watched folders" in runner.invoke(main, ["watch"], env=env).output


def test_a_dead_workers_task_is_looked_for_soon_after_its_visibility_timeout(settings: Settings) -> None:
    # kombu's defaults look for expired unacknowledged tasks about every 100 s, with a 5-minute lock.
    short = create_app(
        settings.replace(broker_url="redis://127.0.0.1:6379/15", broker_visibility_timeout_s=4)
    )
    options = short.conf.broker_transport_options
    assert options["visibility_timeout"] == 4
    assert options["unacked_restore_interval"] * options["unacked_restore_throttle"] <= 4
    assert options["unacked_mutex_expire"] <= 60
    default = create_app(
        settings.replace(broker_url="redis://127.0.0.1:6379/15")
    ).conf.broker_transport_options
    assert default["visibility_timeout"] == settings.broker_visibility_timeout_s
    assert default["unacked_restore_interval"] * default["unacked_restore_throttle"] <= 10
