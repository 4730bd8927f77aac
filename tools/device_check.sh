#!/usr/bin/env bash
# One prepared GPU check (for a session that is lent a GPU machine): every spec's CPU variant
# through the conformance harness on cuda, then in bf16 where a spec's CPU variant declares it,
# then `zoo sample` under torchrun on cuda, then the benchmarks. Writes everything under ${OUT:-out}/ and prints a
# summary table.
#   usage: bash tools/device_check.sh            (expects the project installed, e.g. by .ci/run)
set -uo pipefail
OUT="${OUT:-out}"; mkdir -p "$OUT"
export HF_HUB_OFFLINE=1
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
for b in tools/bench_*.py; do
  timeout 300 python "$b" --help >/dev/null 2>&1 || continue
  echo "== $b" | tee -a "$OUT/bench.txt"
  timeout 300 python "$b" --device cuda >> "$OUT/bench.txt" 2>&1 || echo "(failed or no --device option)" >> "$OUT/bench.txt"
done
grep -E "^(PASS|FAIL|SKIP)" "$OUT"/check-cuda*.txt | awk '{print $1}' | sort | uniq -c
