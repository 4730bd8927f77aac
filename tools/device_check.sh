#!/usr/bin/env bash
# One prepared GPU check (for a session that is lent a GPU machine): every spec's CPU variant
# through the conformance harness on cuda, then in bf16 where a spec's CPU variant declares it,
# then `zoo sample` under torchrun on cuda, then PoE-Bridge's speed benchmark on cuda (its 5x claim is a GPU
# claim, issue 40), then Deep Forcing's 480x832 random-weight Wan probe (memory, bf16 drift; issue 38), then the other benchmarks. Writes everything under ${OUT:-out}/ and prints a summary table.
#   usage: bash tools/device_check.sh            (expects the project installed, e.g. by .ci/run)
#          POE_ONLY=1 DEVICE=cpu POE_ARGS=--quick bash tools/device_check.sh   (the PoE-Bridge step alone, a CPU dry run;
#          POE_ARGS replaces the default "--problems 64 --repeats 3")
set -uo pipefail
OUT="${OUT:-out}"; mkdir -p "$OUT"
DEVICE="${DEVICE:-cuda}"
export HF_HUB_OFFLINE=1
# PoE-Bridge on the GPU: every pair, K = 1 and K = 4, wall clock with the device synchronised and the cost model
# from CUDA-timed forwards (the table's "cost per forward" line); the engine's outputs (table, JSON, PNG) in
# $OUT/poe-bridge-$DEVICE/, the log in $OUT/poe-bridge-$DEVICE.txt
poe_bench() {
  local args="${POE_ARGS:---problems 64 --repeats 3}"
  echo "== zoo bench poe-bridge --device $DEVICE $args" | tee -a "$OUT/bench.txt"
  timeout "${POE_TIMEOUT:-420}" zoo bench poe-bridge --device "$DEVICE" $args \
    --out-dir "$OUT/poe-bridge-$DEVICE" > "$OUT/poe-bridge-$DEVICE.txt" 2>&1 \
    && grep -E "^\[|^cost per forward|^  K=" "$OUT/poe-bridge-$DEVICE.txt" | tee -a "$OUT/bench.txt" \
    || { echo "(poe-bridge bench failed, see poe-bridge-$DEVICE.txt)" | tee -a "$OUT/bench.txt"; tail -5 "$OUT/poe-bridge-$DEVICE.txt"; }
}
if [ -n "${POE_ONLY:-}" ]; then poe_bench; exit 0; fi
python - <<'PY' > "$OUT/env.txt" 2>&1
import torch, transformers, diffusers, timm
print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
print("transformers", transformers.__version__, "diffusers", diffusers.__version__, "timm", timm.__version__)
PY
cat "$OUT/env.txt"
zoo doctor > "$OUT/doctor.txt" 2>&1
zoo check --all --device cuda 2>&1 | tee "$OUT/check-cuda.txt" | tail -3
BF16=$(python -c "
import zoo
print(' '.join(n for n in zoo.list() for v in zoo.spec(n).variants
               if zoo.spec(n).hardware[v].accelerator in ('cpu', 'any') and 'bfloat16' in zoo.spec(n).hardware[v].dtypes))")
if [ -n "$BF16" ]; then zoo check $BF16 --device cuda --dtype bfloat16 2>&1 | tee "$OUT/check-cuda-bf16.txt" | tail -3; fi
# zoo sample on the GPU through torchrun (NCCL, one process per GPU): two specs, then the same command again, which
# must keep every shard (verified); the shards go to a temp folder, the logs under $OUT
SAMPLES=$(mktemp -d)
for s in f-dpmsolver:digits unidflow:toy; do
  name=${s%%:*}; variant=${s##*:}
  for pass in 1 2; do
    timeout 300 torchrun --nproc-per-node 1 -m zoo sample "$name" --variant "$variant" --num-samples 256 --batch-size 64 \
      --device cuda --out "$SAMPLES/$name" --no-progress 2>&1 | tail -1 | tee -a "$OUT/sample-cuda.txt"
  done
  python -c "import sys, zoo; o = zoo.read_samples(sys.argv[1]); print(sys.argv[1], type(o).__name__, 'rows', len(o[0]))" \
    "$SAMPLES/$name" 2>&1 | tail -1 | tee -a "$OUT/sample-cuda.txt"
done
rm -rf "$SAMPLES"
poe_bench
# Deep Forcing's Wan path at the real shape (issue 38 item 4): a random-weight Wan2.1-1.3B-shaped transformer, 8 chunks
# of 3 latent frames at 480x832 through the Deep Forcing cache; peak CUDA memory (bf16) and bf16-vs-fp32 drift per
# chunk, with the fp32 RoPE rotation and the earlier cast-first one (prints one SKIP line without CUDA)
echo "== deep-forcing device probe --device $DEVICE" | tee -a "$OUT/bench.txt"
timeout "${DF_PROBE_TIMEOUT:-300}" python -m zoo.methods.deep_forcing.device_probe --device "$DEVICE" \
  --json "$OUT/deep-forcing-probe.json" 2>&1 | grep -v "should be kept in float32" | tee "$OUT/deep-forcing-probe.txt" | tee -a "$OUT/bench.txt" \
  || echo "(deep-forcing probe failed, see deep-forcing-probe.txt)" | tee -a "$OUT/bench.txt"
# every benchmark that takes --device, on cuda, through the engine's CLI (--quick: this script is sized to fit)
for name in $(python -c "import zoo; print(' '.join(zoo.list()))"); do
  timeout 120 zoo bench "$name" --help 2>/dev/null | grep -q -- "--device" || continue
  echo "== zoo bench $name --quick --device cuda" | tee -a "$OUT/bench.txt"
  timeout 300 zoo bench "$name" --quick --device cuda --out-dir "$OUT/bench-$name" >> "$OUT/bench.txt" 2>&1 \
    || echo "(failed)" >> "$OUT/bench.txt"
done
grep -E "^(PASS|FAIL|SKIP)" "$OUT"/check-cuda*.txt | awk '{print $1}' | sort | uniq -c
