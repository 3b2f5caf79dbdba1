"""Security rules checked on the source and on behaviour: no unsafe deserialization, SQL never built from
strings, HTML never fetched from or run, secrets masked, the data folder not open to other users."""

from __future__ import annotations

import ast
import socket
import stat
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("spanqa", "ingest", "retriever", "reader", "workers")


def _sources() -> list[Path]:
    return [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def _name(call: ast.Call) -> str:
    func = call.func
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def test_no_unsafe_deserialization() -> None:
    wrong = []
    for path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                if any(n.split(".")[0] in ("pickle", "dill", "marshal", "shelve") for n in names):
                    wrong.append(f"{path.name}: imports a pickle-like module")
        for call in _calls(tree):
            name = _name(call)
            keywords = {k.arg: k.value for k in call.keywords}
            if name.endswith("torch.load"):
                safe = keywords.get("weights_only")
                if not (isinstance(safe, ast.Constant) and safe.value is True):
                    wrong.append(f"{path.name}:{call.lineno}: torch.load without weights_only=True")
            if name in ("yaml.load", "yaml.unsafe_load") or name.endswith(".unsafe_load"):
                wrong.append(f"{path.name}:{call.lineno}: {name}")
    assert not wrong, "\n".join(wrong)


def _constant_strings(tree: ast.AST) -> set[str]:
    """Names assigned only string literals (or their concatenations) in a file: SQL fragments, not values."""

    def literal(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str)
        return isinstance(node, ast.BinOp) and literal(node.left) and literal(node.right)

    assigned: dict[str, bool] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assigned[target.id] = assigned.get(target.id, True) and literal(node.value)
    return {name for name, constant in assigned.items() if constant}


def _sql_from_values(tree: ast.AST) -> list[int]:
    """Lines where ``text()`` or raw SQL is built from anything but literals and literal fragments."""
    constants = _constant_strings(tree)
    lines = []
    for call in _calls(tree):
        if _name(call).split(".")[-1] not in ("text", "exec_driver_sql", "execute") or not call.args:
            continue
        first = call.args[0]
        if isinstance(first, ast.JoinedStr):
            values = [v.value for v in first.values if isinstance(v, ast.FormattedValue)]
            if not all(isinstance(v, ast.Name) and v.id in constants for v in values):
                lines.append(call.lineno)
        elif isinstance(first, ast.BinOp) or (
            isinstance(first, ast.Call) and _name(first).endswith("format")
        ):
            lines.append(call.lineno)
    return lines


def test_sql_text_is_never_built_from_values() -> None:
    """``text()`` and raw SQL take literals (or literal fragments); values go in as bound parameters."""
    wrong = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in _sources()
        for line in _sql_from_values(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not wrong, "SQL built from values: " + ", ".join(wrong)
    checked = ast.parse(
        'PART = "WHERE id = 1"\n'
        'text(f"SELECT * FROM t {PART}")\n'  # a literal fragment: fine
        'text(f"SELECT * FROM t WHERE id = {user_id}")\n'
        'conn.execute("DELETE FROM t WHERE id = " + user_id)\n'
        'text("SELECT * FROM t WHERE id = {}".format(user_id))\n'
    )
    assert _sql_from_values(checked) == [3, 4, 5]


def test_html_is_never_fetched_from_or_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spanqa.ingest.loaders import load_file

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("loading a document opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    page = tmp_path / "page.html"
    page.write_text(
        "<!doctype html><html><head><link rel=stylesheet href=http://example.com/a.css>"
        "<script src=http://example.com/a.js></script><script>document.write('INJECTED')</script></head>"
        "<body><p>Visible text.</p><img src=http://example.com/a.png onerror=alert(1)>"
        "<iframe src=http://example.com/></iframe><object data=http://example.com/x></object></body></html>"
    )
    loaded = load_file(page)
    assert loaded.text == "Visible text."  # scripts, frames and objects are dropped, never run or fetched


def test_secrets_are_masked(tmp_path: Path) -> None:
    from spanqa.errors import redact_url
    from spanqa.settings import Settings

    settings = Settings.load(
        environ={
            "SPANQA_API_KEY": "key-123",
            "SPANQA_QDRANT_API_KEY": "qkey-456",
            "SPANQA_DATABASE_URL": "postgresql+psycopg://app:hunter2@db/spanqa",
        },
        data_dir=tmp_path,
    )
    shown = str(settings.public_dict())
    assert "key-123" not in shown and "qkey-456" not in shown
    assert "hunter2" not in redact_url(settings.catalog_url)


def test_the_data_folder_is_not_open_to_others(tmp_path: Path, settings: object) -> None:
    from spanqa.runtime import Runtime

    with Runtime(settings.replace(data_dir=tmp_path / "fresh")) as runtime:  # type: ignore[attr-defined]
        runtime.catalog.counts()
        runtime.index  # noqa: B018 - creates the store
    for path in [tmp_path / "fresh", *(tmp_path / "fresh").rglob("*")]:
        assert not path.stat().st_mode & stat.S_IWOTH, f"{path} is writable by anyone"
