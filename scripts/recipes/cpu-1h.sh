#!/usr/bin/env bash
# The one-hour CPU recipe: the best recognizer that an hour of training on a
# 2-core machine buys, measured on voices and sentences it never heard.
#   1. installs the dependencies and builds the program (CPU, build-demo/);
#   2. generates the wide corpus once (scripts/make-corpus.sh --profile wide:
#      train on seen voices; valid/test on seen voices; valid/test on a voice
#      family held out of training) into data/cpu-1h, timed;
#   3. prepares the tokenizer and the CMVN statistics (mpiasr prepare), timed;
#   4. trains scripts/configs/cpu-1h.yaml with two MPI ranks of one thread
#      for at most --minutes of wall time (training.max_minutes: the step in
#      progress, a last validation and a checkpoint follow), validating on
#      valid-unseen, into runs/cpu-1h;
#   5. evaluates the best checkpoint (by valid-unseen CER) on test-seen and
#      test-unseen, separately: greedy decoding, and the beam search (beam
#      2048) with a 3-gram LM of the corpus's text less its valid and test
#      sentences (lm-text.txt; weight 0.8, word bonus 3) and the system word
#      list as its lexicon (docs/decoding.md); then both again with the model
#      adapted to each utterance before it is decoded (test-time adaptation:
#      --adapt-steps 10 --adapt-temperature 2.5 and --adapt-lr 3e-3 greedy,
#      1e-3 with the LM, chosen on valid-unseen;
#      docs/decoding.md#test-time-adaptation);
#   6. draws valid-unseen CER against wall-clock minutes (cer-minutes.png) and
#      the usual curves against steps (metrics.png), and writes summary.txt
#      with the times, the commit, the CPU and a results row for the table
#      of docs/cpu-1h-recipe.md.
# Run it again and training resumes where it stopped (a spent budget goes
# straight to evaluation); remove the run folder to start over. The corpus is
# made once per --hours and reused by every run.
#
# Usage: bash scripts/recipes/cpu-1h.sh [options] [-- CONFIG OVERRIDES...]
#   --hours H               hours of training speech to generate (default 20)
#   --minutes M             training wall-time budget (default: the config's, 59)
#   --config FILE           training config (default scripts/configs/cpu-1h.yaml)
#   --corpus DIR            corpus folder (default data/cpu-1h)
#   --run DIR               run folder (default runs/cpu-1h)
#   --name NAME             the setting's name in the results row (default: the
#                           overrides, or "cpu-1h.yaml")
#   --seed S                corpus seed (default 1)
#   --valid-utterances N    utterances in each valid split (default 300)
#   --test-utterances N     utterances in each test split (default 600)
#   --jobs J                corpus generation jobs (default: the number of cores)
# Overrides after -- go to prepare and train, e.g.
#   bash scripts/recipes/cpu-1h.sh --run runs/cpu-1h-nospec -- --spec_augment.enabled=false
set -euo pipefail
cd "$(dirname "$0")/../.."

hours=20 minutes="" config=scripts/configs/cpu-1h.yaml corpus=data/cpu-1h run=runs/cpu-1h
name="" seed=1 valid_utterances=300 test_utterances=600 jobs="$(nproc)" overrides=()
while (($#)); do
  case "$1" in
    --hours | --minutes | --config | --corpus | --run | --name | --seed | --valid-utterances | \
      --test-utterances | --jobs)
      (($# >= 2)) || { echo "cpu-1h.sh: $1 needs a value" >&2; exit 2; } ;;&
    --hours) hours="$2"; shift 2 ;;
    --minutes) minutes="$2"; shift 2 ;;
    --config) config="$2"; shift 2 ;;
    --corpus) corpus="$2"; shift 2 ;;
    --run) run="$2"; shift 2 ;;
    --name) name="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --valid-utterances) valid_utterances="$2"; shift 2 ;;
    --test-utterances) test_utterances="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --) shift; overrides=("$@"); break ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "cpu-1h.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n "$name" ]] || name="${overrides[*]:-${config##*/}}"

# shellcheck source=scripts/recipes/common.sh
source scripts/recipes/common.sh
install_and_build

# The corpus, made once per size: generated.txt records what was made and how long it took.
corpus_args=(--profile wide --hours "$hours" --seed "$seed" --valid-utterances "$valid_utterances"
  --test-utterances "$test_utterances")
if [[ "$(sed -n 's/^options: //p' "$corpus/generated.txt" 2>/dev/null)" == "${corpus_args[*]}" ]]; then
  stamp "corpus: using $corpus, generated in $(sed -n 's/^took: //p' "$corpus/generated.txt")"
else
  stamp "corpus: generating $hours hours of training speech and the valid/test splits into $corpus"
  generation_start=$SECONDS load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
  mkdir -p "$corpus"
  bash scripts/make-corpus.sh --out "$corpus" "${corpus_args[@]}" --jobs "$jobs" |
    tee "$corpus/make-corpus.log"
  # An interrupted generation resumes: the time is then that of the rest.
  printf 'options: %s\ntook: %d s with %d jobs (%s; load average before: %s; %s)\n' \
    "${corpus_args[*]}" $((SECONDS - generation_start)) "$jobs" "$(date -u +%FT%TZ)" \
    "$load_before" "$(grep -o '[0-9]* already present' "$corpus/make-corpus.log")" \
    >"$corpus/generated.txt"
fi
generation="$(sed -n 's/^took: //p' "$corpus/generated.txt")"

data_args=(--data.train_manifest="$corpus/train.tsv" --data.valid_manifest="$corpus/valid-unseen.tsv"
  --data.test_manifest="$corpus/test-unseen.tsv" --output.dir="$run")
[[ -z "$minutes" ]] || data_args+=(--training.max_minutes="$minutes")

stamp "prepare: tokenizer and CMVN statistics in $run"
prepare_start=$SECONDS
"$mpiasr" prepare "$config" --no-audio-check "${data_args[@]}" "${overrides[@]}"
prepare_seconds=$((SECONDS - prepare_start))

allow_mpirun_as_root
stamp "training: 2 ranks x 1 thread into $run (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
train_start=$SECONDS
mpirun -np 2 --oversubscribe "$mpiasr" train "$config" --training.threads=1 "${data_args[@]}" \
  "${overrides[@]}"
train_seconds=$((SECONDS - train_start))

# The LM learns the corpus's text less every valid and test sentence
# (lm-text.txt, written by the plan; a corpus planned before it had one gets
# it from its plan's options, which give the same plan again).
if [[ ! -s $corpus/lm-text.txt ]]; then
  /usr/bin/python3 scripts/corpus_plan.py plan "$corpus" "${corpus_args[@]}"
fi
train_lm "$run" "$corpus/lm-text.txt"
word_list_lexicon "$run"
lexicon_search=(--decoder beam --beam 2048 --lm "$run/lm3.arpa" --lm-weight 0.8 --word-bonus 3
  --lexicon "$run/lexicon.txt")
greedy_adaptation=(--adapt-steps 10 --adapt-lr 3e-3 --adapt-temperature 2.5)
search_adaptation=(--adapt-steps 10 --adapt-lr 1e-3 --adapt-temperature 2.5)
for split in test-seen test-unseen; do
  stamp "evaluation of the best checkpoint on $split, greedy"
  evaluate "$run" "$corpus/$split.tsv" "$run/$split"
  stamp "evaluation of the best checkpoint on $split, beam search with the LM and the lexicon"
  evaluate "$run" "$corpus/$split.tsv" "$run/$split-lexicon" "${lexicon_search[@]}"
  stamp "evaluation on $split adapted to each utterance, greedy"
  evaluate "$run" "$corpus/$split.tsv" "$run/$split-adapted" "${greedy_adaptation[@]}"
  stamp "evaluation on $split adapted to each utterance, beam search with the LM and the lexicon"
  evaluate "$run" "$corpus/$split.tsv" "$run/$split-adapted-lexicon" "${search_adaptation[@]}" \
    "${lexicon_search[@]}"
done

stamp "plots"
scripts/plot-metrics "$run/metrics.jsonl" "$run/metrics.png"
scripts/plot-metrics --x minutes --valid-name valid-unseen "$run/metrics.jsonl" \
  "$run/cer-minutes.png"

# The newest checkpoint's state: steps, the time trained over all runs, the
# best valid-unseen CER.
latest="$run/checkpoints/$(cat "$run/checkpoints/latest")/state.json"
read -r steps train_minutes valid_cer < <(/usr/bin/python3 -c '
import json, sys
state = json.load(open(sys.argv[1]))
minutes, cer = state["train_seconds"] / 60, state["best_cer"]
print(state["step"], f"{minutes:.1f}", "-" if cer is None else f"{100 * cer:.2f}")' "$latest")
# The commit the figures are measured at ("+dirty" when the tree differs from
# it) and the CPU, for the table of docs/cpu-1h-recipe.md.
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ $commit != unknown && -n $(git status --porcelain 2>/dev/null) ]]; then commit+="+dirty"; fi
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
{
  echo "run: $run ($config ${overrides[*]})"
  echo "commit: $commit; CPU: ${cpu:-unknown}, $(nproc) cores; $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "corpus: $corpus, ${corpus_args[*]}; generation took $generation"
  echo "prepare: ${prepare_seconds}s; training (this invocation): ${train_seconds}s;" \
    "trained in all runs: $train_minutes min, $steps steps"
  echo "valid-unseen CER (best checkpoint): $valid_cer%"
  echo "test-seen:   $(grep -E '^(CER|WER) ' "$run/test-seen-eval.log" | tr '\n' ' ')"
  echo "test-unseen: $(grep -E '^(CER|WER) ' "$run/test-unseen-eval.log" | tr '\n' ' ')"
  echo "beam search, LM and lexicon:"
  echo "test-seen:   $(grep -E '^(CER|WER) ' "$run/test-seen-lexicon-eval.log" | tr '\n' ' ')"
  echo "test-unseen: $(grep -E '^(CER|WER) ' "$run/test-unseen-lexicon-eval.log" | tr '\n' ' ')"
  echo "adapted to each utterance (${greedy_adaptation[*]}), greedy:"
  echo "test-seen:   $(grep -E '^(CER|WER) ' "$run/test-seen-adapted-eval.log" | tr '\n' ' ')"
  echo "test-unseen: $(grep -E '^(CER|WER) ' "$run/test-unseen-adapted-eval.log" | tr '\n' ' ')"
  echo "adapted (${search_adaptation[*]}), beam search, LM and lexicon:"
  echo "test-seen:   $(grep -E '^(CER|WER) ' "$run/test-seen-adapted-lexicon-eval.log" | tr '\n' ' ')"
  echo "test-unseen: $(grep -E '^(CER|WER) ' "$run/test-unseen-adapted-lexicon-eval.log" | tr '\n' ' ')"
  echo "| setting | commit | steps | minutes | valid-unseen CER | test-seen CER | test-unseen CER |"
  echo "| $name | \`$commit\` | $steps | $train_minutes | $valid_cer% |" \
    "$(cer_of "$run/test-seen-eval.log")% | $(cer_of "$run/test-unseen-eval.log")% |"
  echo "| $name, beam + LM + lexicon | \`$commit\` | $steps | $train_minutes | - |" \
    "$(cer_of "$run/test-seen-lexicon-eval.log")% | $(cer_of "$run/test-unseen-lexicon-eval.log")% |"
  echo "| $name, adapted | \`$commit\` | $steps | $train_minutes | - |" \
    "$(cer_of "$run/test-seen-adapted-eval.log")% | $(cer_of "$run/test-unseen-adapted-eval.log")% |"
  echo "| $name, adapted, beam + LM + lexicon | \`$commit\` | $steps | $train_minutes | - |" \
    "$(cer_of "$run/test-seen-adapted-lexicon-eval.log")% |" \
    "$(cer_of "$run/test-unseen-adapted-lexicon-eval.log")% |"
} >"$run/summary.txt"
stamp "done"
cat "$run/summary.txt"
echo "curves: $run/cer-minutes.png, $run/metrics.png; hypotheses: $run/test-*-hypotheses.tsv"
