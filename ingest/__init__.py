"""Files -> text -> chunks: format loaders, the chunker, the catalog and the ingest job."""
