#!/usr/bin/env bash
# The mpiasr demo, from a fresh clone to a trained recognizer on one machine:
#   1. installs the dependencies (scripts/install-deps.sh) and builds the
#      program, Release, CPU only, in build-demo/;
#   2. generates about 4 hours of synthetic speech in data/corpus
#      (scripts/make-corpus.sh; skipped when it is already there);
#   3. trains the `small` Conformer-CTC (scripts/configs/small.yaml) on the CPU
#      with two MPI ranks of one thread each, for a fixed number of steps
#      (about 10 minutes on an idle 2-core machine), into runs/demo;
#   4. evaluates the best checkpoint on the held-out test set: CER, WER and a
#      few reference/hypothesis pairs, decoded greedily and then by beam search
#      with a 3-gram language model of the training transcripts (its weight
#      and word bonus chosen on the validation set, see README "Decoding");
#   5. draws the training curves into runs/demo/metrics.png.
# Run it again and training resumes from its last checkpoint (or, when done,
# goes straight to evaluation); remove runs/demo to start over.
#
# Usage: bash scripts/demo.sh [--steps N]   (default 500 training steps)
set -euo pipefail
cd "$(dirname "$0")/.."

steps=500
while (($#)); do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "demo.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# shellcheck source=scripts/recipes/common.sh
source scripts/recipes/common.sh
install_and_build

corpus=data/corpus
if [[ -s $corpus/test.tsv ]]; then
  stamp "corpus: using $corpus"
else
  stamp "corpus: generating about 4 hours of speech into $corpus"
  bash scripts/make-corpus.sh --out "$corpus" --hours 4 --seed 1 --jobs "$(nproc)"
fi

allow_mpirun_as_root
out=runs/demo
stamp "training: 2 ranks x 1 thread, $steps steps, into $out"
train_start=$SECONDS
mpirun -np 2 --oversubscribe "$mpiasr" train scripts/configs/small.yaml \
  --output.dir="$out" --training.threads=1 --training.max_steps="$steps"
train_seconds=$((SECONDS - train_start))

stamp "evaluation on the test set ($corpus/test.tsv)"
evaluate "$out" "$corpus/test.tsv" "$out/test"

stamp "beam search with a 3-gram language model of the training transcripts"
cut -f2 "$corpus/train.tsv" >"$out/train-transcripts.txt"
"$mpiasr" lm "$out/train-transcripts.txt" --order 3 --out "$out/lm3.arpa"
evaluate "$out" "$corpus/test.tsv" "$out/test-beam-lm" --decoder beam --beam 16 \
  --lm "$out/lm3.arpa" --lm-weight 0.3 --word-bonus 1.5

stamp "metrics plot"
scripts/plot-metrics "$out/metrics.jsonl" "$out/metrics.png"
echo "training curves: $out/metrics.png"

stamp "done"
echo "training wall time: ${train_seconds}s; total: ${SECONDS}s"
echo "greedy decoding:"
grep -E '^(CER|WER) ' "$out/test-eval.log"
echo "beam search with the 3-gram LM:"
grep -E '^(CER|WER) ' "$out/test-beam-lm-eval.log"
echo "per-utterance hypotheses: $out/test-hypotheses.tsv; checkpoints: $out/checkpoints"
