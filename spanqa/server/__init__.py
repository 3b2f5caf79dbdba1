"""``spanqa serve``: the HTTP API and the web page (FastAPI lives in this package alone)."""
