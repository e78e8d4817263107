#!/usr/bin/env bash
# The GPU checks in one go, for a machine with an NVIDIA GPU, CuPy and PyTorch (CUDA):
# build the kernels in place, run tests/test_gpu.py on the real device (the emulated half
# runs in CI anyway), then time every benchmark case against PyTorch/cuDNN.
# Logs and the benchmark's JSON go to $OUT (default ./gpu-check-out).
#
#   bash scripts/gpu_check.sh            # all of it
#   GPU_CHECK_ONLY=bpi_resnet,dwf_k5 bash scripts/gpu_check.sh   # benchmark these cases only
set -u
OUT=${OUT:-gpu-check-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
$PY -c "import sys, numpy, cupy, torch; print(sys.version.split()[0], 'numpy', numpy.__version__,
'cupy', cupy.__version__, 'torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/gpu.txt"

start=$(date +%s)
# A compiler newer than the code's may warn where ours does not: no -Werror here.
if ! CONVVIZ_WERROR=0 timeout 300 $PY setup.py -q build_ext --inplace -j "$(nproc)" > "$OUT/build.log" 2>&1; then
    tail -40 "$OUT/build.log"
    exit 1
fi
echo "build: $(( $(date +%s) - start )) s"

start=$(date +%s)
timeout 240 $PY -m pytest -q -rs -p no:cacheprovider tests/test_gpu.py -k "not emulated" --durations=5 \
    2>&1 | tee "$OUT/test_gpu.log" | tail -25
echo "tests: $(( $(date +%s) - start )) s"

start=$(date +%s)
only=${GPU_CHECK_ONLY:+--only $GPU_CHECK_ONLY}
# shellcheck disable=SC2086
timeout 300 $PY -m convviz bench --device gpu $only --json "$OUT/gpu-bench.json" > "$OUT/gpu-bench.md" \
    2> "$OUT/gpu-bench.log"
echo "bench: rc $? in $(( $(date +%s) - start )) s"
cat "$OUT/gpu-bench.md"
