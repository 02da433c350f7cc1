#!/bin/bash
# The GPU checks of a session that is lent a GPU machine, in two steps:
#
#   bash scripts/gpu-check.sh prepare [GPU]   # here (default sm_90): cubins of both compilers for the
#                                             # realistic kernels, our cubins for 48 generated variants
#                                             # and 3 grouped GEMMs (maps made in the kernel),
#                                             # into .devkit/ (ignored by git; carry it to the machine)
#   bash scripts/gpu-check.sh run             # there: needs only python3 with numpy, ml_dtypes and
#                                             # cuda-bindings (torch optional); writes logs to $OUT
#
# `run` launches every kernel in a process of its own (a hang or fault spoils only it) and reports
# ours against NVIDIA's outputs and times (benchmarks/kernels.py --load), the generated variants
# against numpy (benchmarks/generated_gpu.py --load), then `pytest -m gpu`. About 4 minutes on an
# H200; the device tool's run: command `bash scripts/gpu-check.sh run`, carry [".devkit"].
set -u
cd "$(dirname "$0")/.."
mode=${1:-}
case "$mode" in
  prepare)
    gpu=${2:-sm_90}
    grep -qx "/.devkit/" .git/info/exclude 2>/dev/null || echo "/.devkit/" >> .git/info/exclude
    rm -rf .devkit/cubins .devkit/gen
    PATH=.venv/bin:$PATH PYTHONPATH=. .venv/bin/python benchmarks/kernels.py --save .devkit/cubins --gpu-name "$gpu" \
      | tail -1
    PATH=.venv/bin:$PATH PYTHONPATH=. .venv/bin/python benchmarks/generated_gpu.py --save .devkit/gen --count 300 \
      --seed 0 --pick 48 --gpu-name "$gpu" | tail -1
    # grouped GEMMs, whose tensor maps the kernel makes in the workspace or per-CTA memory the driver gives
    # (lowering/kernel_maps.py): not yet run on a GPU
    PATH=.venv/bin:$PATH PYTHONPATH=. .venv/bin/python benchmarks/generated_gpu.py --save .devkit/maps \
      --gpu-name "$gpu" --names g_group_gemm_bf16_rc_g4_128x128x32_aligned_occ2_v13p4 \
      g_group_gemm_f16_rr_g2_64x128x64_aligned_occ2_v13p3 g_group_gemm_bf16_rr_g2_64x128x64_ragged_ctas2_v13p3 | tail -1
    du -sh .devkit
    ;;
  run)
    export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=.
    out=${OUT:-/tmp/gpu-check}
    mkdir -p "$out"
    nvidia-smi -L
    echo "=== realistic kernels: ours vs NVIDIA's (time, outputs)"
    timeout 300 python3 benchmarks/kernels.py --load .devkit/cubins --no-torch --timeout 30 > "$out/kernels.log" 2>&1
    grep -v '^[a-z_0-9]* {' "$out/kernels.log" | grep -E "^[a-z]|ours/nvidia|DIFFERS|FAILED|failed"
    echo "=== generated variants: our cubins vs numpy"
    timeout 180 python3 benchmarks/generated_gpu.py --load .devkit/gen --timeout 20 2>&1 | tee "$out/generated.log" \
      | grep -v "^  ok"
    echo "=== grouped GEMMs through tensor maps the kernel makes: our cubins vs numpy"
    timeout 60 python3 benchmarks/generated_gpu.py --load .devkit/maps --timeout 20 2>&1 | tee "$out/maps.log"
    echo "=== pytest -m gpu"
    CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda} timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu \
      tests/test_run_cli.py tests/test_launcher_c.py 2>&1 | tail -3
    ;;
  *)
    echo "usage: bash scripts/gpu-check.sh prepare [sm_90|sm_100|...] | run" >&2
    exit 2
    ;;
esac
