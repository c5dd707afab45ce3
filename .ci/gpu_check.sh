#!/usr/bin/env bash
# The checks that need a CUDA GPU, which CI does not have: the gpu-marked and CPU-vs-CUDA tests, then the
# generation benchmark on the GPU beside the same model on the CPU. Run from the repository root on a CUDA
# machine with turnkit's dependencies importable; results go to $OUT (default /tmp/gpu_check).
#
#   bash .ci/gpu_check.sh
set -u
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $PY -c "import torch, transformers, peft; print('torch', torch.__version__, 'transformers', transformers.__version__,
          'peft', peft.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
  $PY -c "import vllm; print('vllm', vllm.__version__)" 2>/dev/null || echo "vllm: not installed (its GPU tests skip)"
  nproc
} 2>&1 | tee "$OUT/machine.txt"
status=0
timeout 330 $PY -m pytest -p no:cacheprovider -q -rs --timeout 240 tests/train/test_device.py tests/agents/test_vllm.py \
  tests/agents/test_hf.py tests/train/test_backends.py 2>&1 | tee "$OUT/pytest.log" | tail -n 25
[ "${PIPESTATUS[0]}" = 0 ] || status=1
MODEL="--hidden-size 512 --layers 8 --batch-sizes 1 16 64 --max-new-tokens 64 --repeats 5"
timeout 150 $PY benchmarks/bench_generation.py --device cuda $MODEL 2>&1 | tee "$OUT/bench_generation_cuda.txt"
timeout 150 $PY benchmarks/bench_generation.py --device cpu --threads "$(nproc)" $MODEL 2>&1 \
  | tee "$OUT/bench_generation_cpu.txt"
exit $status
