# Sourced by the GPU recipes, from the repository root: a fresh $WORK; the inputs that travel compressed
# (scripts/gpu/prepare.sh) unpacked into $WORK/input (never into gpu/, which must stay small enough to travel);
# spanqa from the checkout (nothing installed); the wheels of $WHEELS (scripts/gpu/wheels.sh, default
# gpu/wheels) installed into $WORK/site ahead of the image's own packages; Python's output unbuffered.
rm -rf "$WORK"
INPUT=$WORK/input
mkdir -p "$INPUT"
for packed in gpu/*.json.gz; do
    if [ -e "$packed" ]; then gunzip -c "$packed" >"$INPUT/$(basename "$packed" .gz)"; fi
done
for packed in gpu/*.json.xz; do
    # Python's lzma, since a device image need not have the xz tool.
    if [ -e "$packed" ]; then
        python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
            "$packed" "$INPUT/$(basename "$packed" .xz)"
    fi
done
WHEELS=${WHEELS:-gpu/wheels}
if compgen -G "$WHEELS/*.whl" >/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target "$WORK/site" "$WHEELS"/*.whl
    export PYTHONPATH=$WORK/site:$PWD
else
    export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
# The reader the recipes start from: the shipped weights where they travelled, else the float16 copy that
# `prepare.sh reader` leaves in gpu/reader-init (half the size, for a call whose data would not fit beside the
# float32 file), widened back to float32 into $WORK/reader-init.
READER_INIT=reader/models/spanqa-reader-minilm
if [ ! -f "$READER_INIT/model.safetensors" ] && [ -f gpu/reader-init/model.safetensors ]; then
    mkdir -p "$WORK/reader-init"
    cp gpu/reader-init/*.json "$WORK/reader-init/"
    python3 - gpu/reader-init/model.safetensors "$WORK/reader-init/model.safetensors" <<'PY'
import sys

import torch
from safetensors.torch import load_file, save_file

tensors = load_file(sys.argv[1])
save_file({k: v.to(torch.float32) if v.is_floating_point() else v for k, v in tensors.items()}, sys.argv[2],
          metadata={"format": "pt"})
PY
    READER_INIT=$WORK/reader-init
fi
export READER_INIT
