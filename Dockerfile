# spanqa worker/CLI image: CPU torch (pinned first, so pip never pulls a CUDA build), then spanqa.
FROM python:3.11.7-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
WORKDIR /app
RUN pip install --index-url https://download.pytorch.org/whl/cpu "torch==2.13.0"
COPY pyproject.toml README.md ./
COPY spanqa ./spanqa
COPY ingest ./ingest
COPY retriever ./retriever
COPY reader ./reader
COPY workers ./workers
RUN pip install .
RUN useradd --create-home spanqa && mkdir -p /data /docs && chown spanqa /data
USER spanqa
ENV SPANQA_DATA_DIR=/data
# Model exports live on the data volume, so a new container does not export the models again.
ENV SPANQA_MODEL_CACHE_DIR=/data/models
ENTRYPOINT ["spanqa"]
CMD ["--help"]
