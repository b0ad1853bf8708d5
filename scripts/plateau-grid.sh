#!/usr/bin/env bash
# The demo's recipe on corpora of other sizes and profiles: when each run
# leaves the CTC blank plateau (docs/training-quality.md, "Leaving the plateau
# on any corpus"). Run it before and after a change to the initialization,
# the output layer, the schedule or the sampler, and compare the tables.
#
# The grid, each corpus made once by scripts/make-corpus.sh into CORPORA:
#   hour   --hours 1  --seed 5                   (about 0.9 h of training speech)
#   four   --hours 4  --seed 3 --profile wide    (more voices, noise, telephone speech)
#   ten    --hours 10 --seed 7
# For each corpus and seed S: trains `small` as scripts/demo.sh does (2 ranks
# x 1 thread, the 500-step schedule, training.seed S) into OUT/CORPUS-sS,
# validating every 25 steps on the corpus's validation set of seen voices,
# with output.diagnostic_steps, and stops after --steps steps; a run whose
# folder already holds its metrics is kept. Then prints
# scripts/plateau-summary.py's table of every run and writes it as
# OUT/summary.json.
#
# Usage: bash scripts/plateau-grid.sh [--seeds "1 2 3 4 5"] [--steps 150]
#          [--corpora "hour four ten"] [--corpus-dir data/corpora] [--out runs/plateau]
#          [-- TRAIN_OVERRIDE ...]
# e.g.   bash scripts/plateau-grid.sh --out runs/plateau-prior -- --model.prior_bias=true
# About 6 minutes a run on an idle 2-core machine, and 40 minutes to make the
# three corpora the first time.
set -euo pipefail
cd "$(dirname "$0")/.."

seeds="1 2 3 4 5"
steps=150
corpora="hour four ten"
corpus_dir=data/corpora
out=runs/plateau
overrides=()
while (($#)); do
  case "$1" in
    --seeds) seeds="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --corpora) corpora="$2"; shift 2 ;;
    --corpus-dir) corpus_dir="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --) shift; overrides=("$@"); break ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "plateau-grid.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# make_corpus_options NAME: the make-corpus.sh options of a corpus of the grid.
make_corpus_options() {
  case "$1" in
    hour) echo "--hours 1 --seed 5" ;;
    four) echo "--hours 4 --seed 3 --profile wide" ;;
    ten) echo "--hours 10 --seed 7" ;;
    *) echo "plateau-grid.sh: unknown corpus '$1' (hour, four or ten)" >&2; exit 2 ;;
  esac
}

# shellcheck source=scripts/recipes/common.sh
source scripts/recipes/common.sh
for name in $corpora; do make_corpus_options "$name" >/dev/null; done
install_and_build
allow_mpirun_as_root
mkdir -p "$out" "$corpus_dir"

runs=()
for name in $corpora; do
  corpus="$corpus_dir/$name"
  if [[ ! -s $corpus/train.tsv ]]; then
    stamp "corpus $name: make-corpus.sh $(make_corpus_options "$name")"
    # shellcheck disable=SC2046  # the options are words
    bash scripts/make-corpus.sh --out "$corpus" $(make_corpus_options "$name") --jobs "$(nproc)"
  fi
  valid="$corpus/valid.tsv"
  [[ -s $valid ]] || valid="$corpus/valid-seen.tsv"
  for seed in $seeds; do
    run="$out/$name-s$seed"
    runs+=("$run")
    if [[ -s $run/metrics.jsonl ]]; then
      stamp "corpus $name, seed $seed: keeping $run"
      continue
    fi
    stamp "corpus $name, seed $seed: training into $run"
    mpirun -np 2 --oversubscribe "$mpiasr" train scripts/configs/small.yaml \
      --data.train_manifest="$corpus/train.tsv" --data.valid_manifest="$valid" \
      --data.test_manifest="$valid" --training.threads=1 --training.max_steps=500 \
      --training.seed="$seed" --validation.every_steps=25 --checkpoint.every_steps=0 \
      --output.dir="$run" --output.diagnostic_steps="$steps" --stop-at-step="$steps" \
      "${overrides[@]}" >"$run.train.log"
    grep -E '^valid step' "$run.train.log" || true
  done
done

stamp "summary"
python3 scripts/plateau-summary.py --json "$out/summary.json" "${runs[@]}"
