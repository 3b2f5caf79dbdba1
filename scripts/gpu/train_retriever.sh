#!/usr/bin/env bash
# The retriever's GPU recipe: the bi-encoder fine-tuned with the Sentence-BERT objective (multiple-negatives
# ranking with BM25 hard negatives, mean pooling kept) on SQuAD v1.1 train and spanqa-techqa train questions,
# in one device call, weights back in files of at most 16 MB. Prepare here (the training pairs, the starting
# model, the wheels the device lacks; it says whether the call fits and what to leave out if not):
#
#   bash scripts/gpu/prepare.sh retriever
#   # device (carry: gpu):  bash scripts/gpu/train_retriever.sh
#   bash scripts/gpu/join.sh $FILES_AT/retriever runs/gpu-retriever
#
# To try it here first: PATH=$PWD/.venv/bin:$PATH DEVICE=cpu MINUTES=0.3 BATCH=8 OUT=/tmp/gpu-try (a batch of
# 128 takes 24 GB on a CPU); a Python that lacks datasets or bm25s takes PYVER=3.11 bash scripts/gpu/wheels.sh
# and WHEELS=/tmp/wheels-3.11.
#
# Timing (2026-11-27, one H200, the only try so far): unpacking, installing the wheels and mining the BM25
# negatives of 92,266 rows, then training at batch 128, reached 0.42 epoch (300 steps) in 275 s, when the call
# was stopped for lack of device time; SQuAD dev recall@1 was 0.6705 at 0.35 epoch. So one epoch (721 steps)
# takes 7 to 11 minutes, as the setup took more or less of those 275 s (the log has no clock): give the
# recipe a call of its own (timeout 600); MINUTES=7 may stop short of an epoch, and keeps what it has.
#
# A shallower, faster encoder for #29 (ingest speed on AVX2): LOSS=distill KEEP_LAYERS=0,2,4 trains the packaged
# model cut to those layers to embed every question and paragraph as the whole model does (mean squared error
# to its embeddings; no negatives are mined). Not yet run on a GPU; on the CPU, untrained, 0,2,4 encodes 2.07x
# as fast at SQuAD recall@5 37.7 against 86.8 (bench/encoder_layers.py, AVX2), which is what it must win back.
#
# Ship it only when it beats the packaged model on techqa test passage@5 and SQuAD recall@1; an index made with
# the old one is re-embedded with `spanqa reindex --retriever-model PATH` (never mixed).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/gpu-out}
WORK=${WORK:-/tmp/retriever-run}
source scripts/gpu/env.sh
python3 -c "import datasets, bm25s, sentence_transformers"  # what the image lacks came with gpu/wheels
python3 -m spanqa.cli retriever train --train "$INPUT/retriever-train.json" --init "${INIT:-gpu/base-encoder}" \
    --out "$WORK/run" \
    --eval "$INPUT/squad-v1.1-dev-public.json" --eval-limit 2000 --loss "${LOSS:-mnr}" --hard-negatives 1 \
    ${KEEP_LAYERS:+--keep-layers "$KEEP_LAYERS"} \
    --epochs "${EPOCHS:-1}" --batch-size "${BATCH:-128}" --lr "${LR:-3e-5}" --max-seq-length 256 \
    --save-every 250 --device "${DEVICE:-cuda}" --time-limit "${MINUTES:-7}"
mkdir -p "$OUT/retriever"
bash scripts/gpu/split.sh "$WORK/run/final" "$OUT/retriever"
