#!/usr/bin/env bash
# The mpiasr program on GPUs (bf16/fp16-mixed on the CUDA backend), on the same
# 60-utterance corpus as train_e2e.sh: `tiny` trains 300 steps with
# training.device = cuda and its loss falls as on the CPU; a checkpoint of the
# GPU run resumes; eval (CPU) reads the GPU run's fp32 masters; with two or
# more GPUs, `mpirun -np <GPUs>` trains with the NCCL gradient all-reduce.
# Without a GPU it prints SKIP and passes.
# Usage: bash train_gpu.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build_dir="$(cd "$1" && pwd)"
source_dir="$(cd "$2" && pwd)"
mpiasr="$build_dir/mpiasr"
work="$build_dir/train_gpu"
corpus="$build_dir/e2e_corpus"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

gpus=0
if command -v nvidia-smi > /dev/null; then
  gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU' || true)
fi
if (( gpus < 1 )); then
  echo "SKIP: no GPU (nvidia-smi lists none); the CUDA training path needs one"
  exit 0
fi
[[ -x "$mpiasr" ]] || fail "$mpiasr not built"
rm -rf "$work"
mkdir -p "$work"
bash "$source_dir/scripts/make-corpus.sh" --out "$corpus" --utterances 60 --seed 3 \
  --valid-fraction 0.1 --test-fraction 0.1 > "$work/corpus.log"

common=(--data.train_manifest="$corpus/train.tsv" --data.valid_manifest="$corpus/valid.tsv"
  --data.test_manifest="$corpus/test.tsv" --training.threads=2 --training.device=cuda)

# 1. 300 steps of tiny on one GPU; the loss must fall.
out="$work/tiny"
"$mpiasr" train "$source_dir/scripts/configs/tiny.yaml" "${common[@]}" --output.dir="$out" \
  --training.max_steps=300 --training.epochs=1000 --training.log_every=25 \
  --validation.every_steps=150 --checkpoint.every_steps=150 > "$work/train.log" 2>&1 ||
  { tail -20 "$work/train.log"; fail "train exited with $?"; }
grep -qE '^backend: cuda-(bf16|fp16)' "$work/train.log" || fail "the run did not use the CUDA backend"
grep -q '^training done: 300 steps' "$work/train.log" || fail "no 'training done' line"
python3 - "$out/metrics.jsonl" << 'PY' || fail "loss did not fall"
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
train = [r for r in records if r["kind"] == "train"]
first, last = train[0]["loss"], train[-1]["loss"]
print(f"GPU train loss {first:.3f} -> {last:.3f}")
assert train[-1]["step"] == 300, [r["step"] for r in train]
assert last < 0.75 * first, (first, last)
PY

# 2. Resume the GPU run for 50 more steps.
"$mpiasr" train "$source_dir/scripts/configs/tiny.yaml" "${common[@]}" --output.dir="$out" \
  --training.max_steps=350 --training.epochs=1000 --training.log_every=25 \
  --validation.every_steps=0 --checkpoint.every_steps=0 > "$work/resume.log" 2>&1 ||
  { tail -20 "$work/resume.log"; fail "resume exited with $?"; }
grep -q '^resumed from .*step 300' "$work/resume.log" || fail "did not resume from step 300"
grep -q '^training done: 350 steps' "$work/resume.log" || fail "resumed run did not finish"

# 3. eval reads the fp32 masters the GPU run saved.
"$mpiasr" eval --ckpt "$out" --manifest "$corpus/test.tsv" --out "$work/hyps.tsv" \
  > "$work/eval.log" 2>&1 || { cat "$work/eval.log"; fail "eval exited with $?"; }
grep -Eq '^CER [0-9]+\.[0-9]+%' "$work/eval.log" || fail "eval printed no CER"

# 4. One rank per GPU, gradients summed by NCCL.
if (( gpus >= 2 )); then
  if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
  mpirun -np "$gpus" --oversubscribe "$mpiasr" train "$source_dir/scripts/configs/tiny.yaml" \
    "${common[@]}" --output.dir="$work/ranks" --training.max_steps=100 --training.epochs=1000 \
    --validation.every_steps=0 --checkpoint.every_steps=0 > "$work/ranks.log" 2>&1 ||
    { tail -20 "$work/ranks.log"; fail "mpirun train exited with $?"; }
  grep -q "gradient all-reduce: NCCL over $gpus GPUs" "$work/ranks.log" ||
    fail "the multi-rank run did not reduce with NCCL"
  grep -q '^training done: 100 steps' "$work/ranks.log" || fail "multi-rank run did not finish"
fi
echo "train_gpu: all passed"
