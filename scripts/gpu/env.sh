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
