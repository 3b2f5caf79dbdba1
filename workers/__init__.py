"""Celery workers (Redis broker) that ingest in the background; only this package knows Celery."""
