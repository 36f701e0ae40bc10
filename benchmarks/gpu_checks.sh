#!/usr/bin/env bash
# The GPU checks of the torch track, as one prepared script for a machine with a CUDA GPU
# (its own python3 with torch; nothing installed: the package runs from the source tree).
#   bash benchmarks/gpu_checks.sh [OUT_DIR]
# 1. doctor; 2. the CUDA tests (parity with the NumPy track on cuDNN, a short training run);
# 3. the course's scaled-dot attention against F.scaled_dot_product_attention;
# 4. time to 99% on dates: torch track on CUDA against the plain PyTorch model on CUDA, 3 seeds;
# 5. the same with bfloat16 autocast.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/gpu-checks}}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
status=0
step() { echo; echo "== $*"; "$@" || status=1; }
nvidia-smi -L
step python3 -m attention_course doctor --require cuda
step python3 -m pytest -q -p no:cacheprovider -m cuda tests/torch_track/test_torch_cuda.py -k "not gru_loop"
step python3 benchmarks/sdpa_gpu.py
step python3 benchmarks/dates_time_to_accuracy.py --tracks torch --device cuda --seeds 0 1 2
step python3 -m attention_course train --track torch --device cuda --amp --target-accuracy 0.99 --no-progress \
    --out "$out/amp"
exit $status
