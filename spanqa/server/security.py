"""Safe by default: where the server may listen, who may call it, what it may read."""

from __future__ import annotations

import hmac
import ipaddress
import os
from pathlib import Path

from spanqa.errors import SpanqaError
from spanqa.settings import Settings

#: The header that carries the API key (``Authorization: Bearer KEY`` works too).
API_KEY_HEADER = "X-API-Key"


class ServeError(SpanqaError):
    """The server cannot start as asked (a one-line reason, shown to the user)."""


class PathNotServedError(SpanqaError):
    """A path asked for over HTTP cannot be read: outside the ``serve_roots`` (``status`` 403), or not an
    existing absolute path (422)."""

    def __init__(self, message: str, status: int = 403) -> None:
        super().__init__(message)
        self.status = status


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, settings: Settings) -> None:
    """Refuse to listen beyond this machine without an API key.

    Raises:
        ServeError: ``host`` is not a loopback address and no ``api_key`` is set.
    """
    if not is_loopback(host) and not settings.api_key:
        raise ServeError(
            f"refusing to listen on {host} without an API key: set SPANQA_API_KEY (clients send it as "
            f"{API_KEY_HEADER}), or listen on 127.0.0.1"
        )


def key_matches(expected: str | None, given: str | None) -> bool:
    """True when no key is required, or ``given`` equals it (compared in constant time)."""
    if not expected:
        return True
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())


#: Host names a browser uses for this machine: without an API key, requests naming any other host are
#: refused (a page elsewhere cannot rebind its own name to 127.0.0.1 and read the documents).
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def served_path(raw: str, settings: Settings) -> Path:
    """``raw`` as an absolute path (symlinks kept, as the CLI records paths) when it lies in one of the
    ``serve_roots`` once symlinks are resolved, and names no hidden file or folder.

    Raises:
        PathNotServedError: no roots are configured; the path is relative, has ``..``, is hidden, resolves
            outside the roots or does not exist.
    """
    roots = settings.serve_root_paths
    if not roots:
        raise PathNotServedError("ingest over HTTP is off: set SPANQA_SERVE_ROOTS to the folders it may read")
    path = Path(raw).expanduser()
    if not path.is_absolute() or ".." in path.parts:
        raise PathNotServedError("give an absolute path without '..'", 422)
    resolved = path.resolve()
    root = next((r for r in roots if resolved.is_relative_to(r)), None)
    if root is None:
        raise PathNotServedError(f"{raw} is not under the served folders ({', '.join(map(str, roots))})")
    below = [*resolved.relative_to(root).parts, *(p for p in path.parts if p not in root.parts)]
    if any(part.startswith(".") for part in below):
        raise PathNotServedError("hidden files and folders are not served")
    if not resolved.exists():
        raise PathNotServedError(f"no such file or folder: {raw}", 422)
    return Path(os.path.normpath(path))
