"""Builds the components a command needs from Settings, each only when first used.

Opening the embedded vector store takes its lock and loading a model takes seconds, so nothing is opened
or loaded before a command asks for it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from spanqa.errors import SpanqaError
from spanqa.settings import CATALOG_FILE_NAME, DATA_DIR_NAME, Settings

if TYPE_CHECKING:
    from spanqa.ingest.catalog import Catalog
    from spanqa.ingest.job import IngestJob
    from spanqa.reader.calibration import Calibrator
    from spanqa.reader.reader import ExtractiveReader
    from spanqa.retriever.encoder import TextEncoder
    from spanqa.retriever.index import VectorIndex

logger = logging.getLogger(__name__)


class EmptyIndexError(SpanqaError):
    """Nothing has been ingested yet."""


def has_data(settings: Settings) -> bool:
    """Whether the catalog exists (a server database, or the data folder's SQLite file); looking creates
    nothing."""
    return settings.database_url is not None or (settings.data_dir / CATALOG_FILE_NAME).is_file()


def require_data(settings: Settings) -> None:
    """Raise EmptyIndexError, saying where spanqa looked, when nothing was ever ingested there."""
    if not has_data(settings):
        raise EmptyIndexError(
            f"nothing is indexed yet: there is no {settings.data_dir} (spanqa uses the nearest "
            f"{DATA_DIR_NAME} folder above the current one, or --data-dir / SPANQA_DATA_DIR); "
            "run `spanqa ingest PATH` to make one"
        )


class Runtime:
    """The catalog, vector index, encoder and reader of one process, opened lazily and closed together."""

    def __init__(
        self,
        settings: Settings,
        *,
        on_wait: Callable[[str], None] | None = None,
        holds_store: bool = False,
    ) -> None:
        self.settings = settings
        #: Told when this process waits for the embedded store (another command holds it for a while).
        self.on_wait = on_wait
        #: A long-lived process that answers for the others (`spanqa serve`, a worker) keeps the store; a
        #: command's ingest lends it to a process that waits, so that others can ask meanwhile.
        self.holds_store = holds_store
        self._catalog: Catalog | None = None
        self._index: VectorIndex | None = None
        self._encoder: TextEncoder | None = None
        self._reader: ExtractiveReader | None = None
        self._calibrator: Calibrator | None = None
        self._calibrator_loaded = False
        self._calibration_warned = False
        self._reader_weights: str | None = None
        self._reader_weights_known = False
        self._preloading: threading.Thread | None = None

    def preload_models(self) -> None:
        """Load the encoder and the reader in a background thread, while the caller imports and opens the
        rest (a one-shot `spanqa ask` starts about 0.1 s sooner on two cores); ``encoder`` and ``reader``
        wait for it. Nothing is loaded when another process holds the embedded store (questions then go to
        its worker); a load that fails here is done again, and fails, where it is used."""
        from spanqa.retriever.index import VectorIndexInUseError

        try:
            self.index  # noqa: B018 - opening it tells whether the questions are answered here
        except VectorIndexInUseError:
            return
        self._preloading = threading.Thread(target=self._preload, name="spanqa-preload", daemon=True)
        self._preloading.start()

    def _preload(self) -> None:
        try:
            self._encoder = self._make_encoder()
            self._reader = self._make_reader()
            self._reader.warm_up()
        except Exception:  # raised again, to the user, by the property that needs the model
            logger.debug("preloading the models failed", exc_info=True)

    @property
    def models_loaded(self) -> bool:
        """Whether the encoder and the reader are loaded (nothing is loaded to find out)."""
        reader = self._reader
        return self._encoder is not None and reader is not None and reader.loaded_precision is not None

    def _wait_for_preload(self) -> None:
        thread = self._preloading
        if thread is not None and thread is not threading.current_thread():
            thread.join()
            self._preloading = None

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            from spanqa.ingest.catalog import Catalog

            self._catalog = Catalog(self.settings.catalog_url)
        return self._catalog

    @property
    def index(self) -> VectorIndex:
        """The vector index, opened on first use; an embedded store held by another process is an error at
        once (``wait_for_store`` waits for it instead)."""
        if self._index is None:
            self._index = self._open_index(wait_s=0.0)
        return self._index

    def wait_for_store(self, wait_s: float | None = None) -> VectorIndex:
        """The vector index, waiting up to ``wait_s`` (default ``store_wait_s``) for a process that holds the
        embedded store (an ingest gives it to a waiting process as soon as its batch is written); ``on_wait``
        is told when the wait lasts."""
        if self._index is None:
            self._index = self._open_index(wait_s=self.settings.store_wait_s if wait_s is None else wait_s)
        return self._index

    def _open_index(self, *, wait_s: float) -> VectorIndex:
        from spanqa.retriever.index import open_vector_index

        s = self.settings
        if s.qdrant_url is None:
            s.data_dir.mkdir(parents=True, exist_ok=True)
        return open_vector_index(
            path=s.qdrant_path,
            url=s.qdrant_url,
            api_key=s.qdrant_api_key,
            timeout=s.qdrant_timeout_s,
            wait_s=wait_s,
            rewait_s=s.store_wait_s,
            on_wait=self.on_wait,
            quantization=s.vector_quantization,
        )

    @property
    def encoder(self) -> TextEncoder:
        self._wait_for_preload()
        if self._encoder is None:
            self._encoder = self._make_encoder()
        return self._encoder

    def _make_encoder(self) -> TextEncoder:
        """ONNX Runtime where the model allows it (same vectors, far less start-up), else torch."""
        from spanqa.retriever.encoder import EncoderLoadError, SentenceEncoder

        s = self.settings
        # int8 needs ONNX Runtime: asked for by name it is never silently dropped; "auto" takes fp32 on torch.
        int8_required = s.encoder_precision == "int8"
        if int8_required and s.encoder_backend == "torch":
            raise EncoderLoadError("encoder_precision 'int8' needs ONNX Runtime; encoder_backend is 'torch'")
        if s.encoder_backend in {"auto", "onnx"}:
            from spanqa.retriever.onnx_encoder import OnnxEncoder, UnsupportedForOnnx

            encoder = OnnxEncoder(
                model=s.retriever_model,
                cache_dir=s.model_cache,
                batch_size=s.retriever_batch_size,
                max_seq_length=s.retriever_max_seq_length,
                threads=s.torch_threads,
                pooling=s.pooling,
                precision="fp32" if s.encoder_precision == "fp32" else "int8",
            )
            try:
                encoder.warm_up()
                return encoder
            except (UnsupportedForOnnx, ImportError) as exc:
                if s.encoder_backend == "onnx":
                    raise
                if int8_required:
                    raise EncoderLoadError(f"encoder_precision 'int8' needs ONNX Runtime: {exc}") from exc
                logger.info("retriever on torch: %s", exc)
            except Exception as exc:  # a model the exporter cannot handle: torch still can
                if s.encoder_backend == "onnx" or int8_required:
                    raise
                logger.warning("ONNX export of %s failed (%s); using torch", s.retriever_model, exc)
        self._configure_torch()
        return SentenceEncoder.from_settings(s)

    @property
    def reader(self) -> ExtractiveReader:
        self._wait_for_preload()
        if self._reader is None:
            self._reader = self._make_reader()
        return self._reader

    def _make_reader(self) -> ExtractiveReader:
        from spanqa.reader.reader import ExtractiveReader

        # No torch set-up here: a reader on ONNX Runtime never imports torch (a second of start-up); on
        # torch it applies the thread count itself.
        return ExtractiveReader.from_settings(self.settings)

    @property
    def calibrator(self) -> Calibrator | None:
        """The calibrator shipped beside the reader model (None for a model without one)."""
        if not self._calibrator_loaded:
            from spanqa.reader.calibration import calibrator_for
            from spanqa.reader.model import resolve_reader_model

            self._calibrator = calibrator_for(resolve_reader_model(self.settings.reader_model))
            self._calibrator_loaded = True
        return self._calibrator

    @property
    def reader_weights(self) -> str | None:
        """The digest of the reader's local weights (``weights_digest``; None for a hub model), once."""
        if not self._reader_weights_known:
            from spanqa.reader.calibration import weights_digest
            from spanqa.reader.model import resolve_reader_model

            self._reader_weights = weights_digest(resolve_reader_model(self.settings.reader_model))
            self._reader_weights_known = True
        return self._reader_weights

    def calibration_warning(self) -> str | None:
        """Once per runtime: what the score means when the settings differ from the calibrator's."""
        calibrator = self.calibrator
        if calibrator is None or self._calibration_warned:
            return None
        self._calibration_warned = True
        from spanqa.reader.calibration import WEIGHTS_KEY, settings_mismatch

        # Hashing the weights (tens of ms) is only worth it against a calibrator that recorded them.
        weights = self.reader_weights if calibrator.info.get(WEIGHTS_KEY) else None
        changed = settings_mismatch(calibrator, self.settings.score_settings(), weights)
        if not changed:
            return None
        return (
            f"the score was calibrated with other settings: {'; '.join(changed)}. It still ranks answers, "
            "but '70%' no longer means 7 in 10 right: refit with `spanqa reader calibrate` for these settings"
        )

    def ingest_job(self) -> IngestJob:
        from spanqa.ingest.job import IngestJob

        s = self.settings
        return IngestJob(
            catalog=self.catalog,
            encoder=self.encoder,
            index=self.index,
            chunk_tokens=s.chunk_tokens,
            chunk_overlap=s.chunk_overlap,
            max_file_bytes=int(s.max_file_mb * 1_000_000) if s.max_file_mb > 0 else None,
            follow_symlinks_out=s.follow_symlinks_out,
            fold_similarity=s.fold_similarity,
            share_store=not self.holds_store,
            hnsw_build_at=s.hnsw_build_at,
        )

    def _configure_torch(self) -> None:
        if self.settings.torch_threads > 0:
            import torch

            torch.set_num_threads(self.settings.torch_threads)

    def release_store(self) -> None:
        """Close the vector index until next needed (the embedded store admits one process at a time)."""
        if self._index is not None:
            self._index.close()
            self._index = None

    def close(self) -> None:
        self._wait_for_preload()
        if self._index is not None:
            self._index.close()
            self._index = None
        if self._catalog is not None:
            self._catalog.close()
            self._catalog = None
