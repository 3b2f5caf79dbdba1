"""Celery workers (Redis broker) that run the ingest and ask jobs in the background; the only place that knows Celery."""
