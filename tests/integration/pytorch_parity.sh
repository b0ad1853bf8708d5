#!/usr/bin/env bash
# PyTorch parity of the model. Usage: bash pytorch_parity.sh BUILD_DIR SOURCE_DIR
#
# Trains `tiny` for 40 steps on a 24-utterance WAV corpus from
# scripts/make-corpus.sh (cached in the build folder), dumps the log-probs of
# the training set's padded batches with `mpiasr eval --dump-logprobs`, and
# runs scripts/pytorch/check_parity.py on Debian's python3 with python3-torch:
# the plain PyTorch Conformer-CTC loaded from model.safetensors must give
# mpiasr's log-probabilities within 1e-4 on every valid frame, and its front
# end mpiasr's features from the WAV files within 1e-3; adapted to each
# utterance (eval --adapt-steps), the two models' log-probs within 1e-4.
set -euo pipefail
build_dir="$(cd "$1" && pwd)"
source_dir="$(cd "$2" && pwd)"
mpiasr="$build_dir/mpiasr"
work="$build_dir/pytorch_parity"
corpus="$build_dir/parity_corpus"
rm -rf "$work"
mkdir -p "$work"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Debian's python3 holds python3-torch; a python3 earlier on PATH may not.
python=/usr/bin/python3
[[ -x "$python" ]] || python="$(command -v python3)"
"$python" -c "import torch, numpy, yaml" 2>"$work/import.log" ||
  fail "$python cannot import torch, numpy and yaml: install python3-torch python3-numpy python3-yaml (bash scripts/install-deps.sh): $(tail -1 "$work/import.log")"

[[ -x "$mpiasr" ]] || fail "$mpiasr not built"
bash "$source_dir/scripts/make-corpus.sh" --out "$corpus" --utterances 24 --seed 11 --format wav \
  --valid-fraction 0.15 --test-fraction 0.1 --jobs 2 >"$work/corpus.log"

"$mpiasr" train "$source_dir/scripts/configs/tiny.yaml" --data.train_manifest="$corpus/train.tsv" \
  --data.valid_manifest="$corpus/valid.tsv" --training.threads=1 --output.dir="$work/run" \
  --training.max_steps=40 --training.epochs=1000 --validation.every_steps=40 \
  --checkpoint.every_steps=40 >"$work/train.log" 2>&1 || { tail -20 "$work/train.log"; fail "train exited with $?"; }
checkpoint="$work/run/checkpoints/step-00000040"
[[ -f "$checkpoint/model.safetensors" ]] || fail "no checkpoint at step 40"

"$mpiasr" eval --ckpt "$checkpoint" --manifest "$corpus/train.tsv" --threads 1 \
  --dump-logprobs "$work/dump.safetensors" >"$work/eval.log" 2>&1 ||
  { cat "$work/eval.log"; fail "eval exited with $?"; }

"$python" "$source_dir/scripts/pytorch/check_parity.py" --dump "$work/dump.safetensors" |
  tee "$work/parity.log" || fail "PyTorch does not reproduce mpiasr"
grep -q "^features from the audio: .*(ok" "$work/parity.log" || fail "the features were not checked"

# Test-time adaptation: the PyTorch module adapted by torch.optim.Adam and
# autograd gives the log-probs of mpiasr's adapted model.
"$mpiasr" eval --ckpt "$checkpoint" --manifest "$corpus/train.tsv" --threads 1 \
  --adapt-steps 3 --adapt-lr 1e-2 --dump-logprobs "$work/adapted.safetensors" \
  >"$work/eval_adapted.log" 2>&1 || { cat "$work/eval_adapted.log"; fail "eval --adapt-steps exited with $?"; }
"$python" "$source_dir/scripts/pytorch/check_parity.py" --dump "$work/adapted.safetensors" \
  --adapt-steps 3 --adapt-lr 1e-2 | tee "$work/parity_adapted.log" ||
  fail "PyTorch's adaptation does not reproduce mpiasr's"
echo "PyTorch parity: ok"
