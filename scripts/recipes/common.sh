# shellcheck shell=bash
# Steps shared by scripts/demo.sh and scripts/recipes/*.sh; sourced, from the
# repository root, after `set -euo pipefail`.
#
#   stamp TEXT                 prints a section header with the seconds since
#                              the script started ($SECONDS)
#   install_and_build          installs the dependencies and builds the program,
#                              Release, CPU only, in build-demo/ (sets $mpiasr)
#   demo_corpus                the demo's corpus in data/corpus (sets $corpus):
#                              about 4 hours of speech, made once, the same bit
#                              for bit on every machine; train, valid and test
#                              without the held-out voice family, test-unseen
#                              with test's sentences in that family's voices
#   allow_mpirun_as_root       lets OpenMPI start as root (it refuses unless told)
#   evaluate CKPT MANIFEST PREFIX [EVAL OPTION...]
#                              CER and WER of a checkpoint on a manifest with two
#                              ranks of one thread: PREFIX-eval.log (the eval
#                              output) and PREFIX-hypotheses.tsv; the options
#                              go to `mpiasr eval` (e.g. --decoder beam)
#   train_lm RUN [TEXT]        a 3-gram LM of TEXT (one sentence a line; by
#                              default the training transcripts of $corpus):
#                              RUN/lm3.arpa
#   word_list_lexicon RUN      the system word list (wamerican), lower-cased, the
#                              words of [a-z'] only: RUN/lexicon.txt
#   evaluate_demo_test_sets RUN
#                              the demo's evaluation of RUN's best checkpoint on
#                              test and test-unseen of $corpus, greedy and by
#                              beam search ($demo_beam) with a 3-gram LM of the
#                              training transcripts (weight $demo_lm_weight, word
#                              bonus $demo_word_bonus; docs/decoding.md):
#                              RUN/{test,test-unseen}{,-beam-lm}-eval.log
#   cer_of LOG                 the CER percentage of an eval log ("12.34")

stamp() { printf '\n== %s (%ds)\n' "$1" "$SECONDS"; }

mpiasr=build-demo/mpiasr
install_and_build() {
  stamp "dependencies"
  bash scripts/install-deps.sh
  stamp "build (Release, CPU) in build-demo"
  cmake -S . -B build-demo -DCMAKE_BUILD_TYPE=Release -DMPIASR_CUDA=OFF >/dev/null
  cmake --build build-demo -j "$(nproc)" --target mpiasr
}

demo_corpus() {
  corpus=data/corpus
  if [[ -s $corpus/test-unseen.tsv ]]; then
    stamp "corpus: using $corpus"
  elif [[ -s $corpus/test.tsv ]]; then
    echo "error: $corpus was made without held-out voices (it has no test-unseen.tsv): an" \
      "earlier demo's corpus, whose training speech has every voice; remove $corpus and run" \
      "again to make the current one" >&2
    exit 2
  else
    stamp "corpus: generating about 4 hours of speech into $corpus"
    bash scripts/make-corpus.sh --out "$corpus" --hours 4 --seed 1 --hold-out-voices \
      --jobs "$(nproc)"
  fi
}

allow_mpirun_as_root() {
  if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
}

evaluate() {
  local ckpt="$1" manifest="$2" prefix="$3"
  shift 3
  mpirun -np 2 --oversubscribe "$mpiasr" eval --ckpt "$ckpt" --manifest "$manifest" \
    --threads 1 --out "$prefix-hypotheses.tsv" --examples 5 "$@" | tee "$prefix-eval.log"
}

cer_of() { sed -n 's/^CER \([0-9.]*\)%.*/\1/p' "$1"; }

train_lm() {
  local text="$1/train-transcripts.txt"
  if (($# >= 2)); then
    text="$2"
  else
    cut -f2 "$corpus/train.tsv" >"$text"
  fi
  "$mpiasr" lm "$text" --order 3 --out "$1/lm3.arpa"
}

word_list_lexicon() {
  LC_ALL=C tr '[:upper:]' '[:lower:]' </usr/share/dict/american-english |
    LC_ALL=C grep -x "[a-z']*" | LC_ALL=C sort -u >"$1/lexicon.txt"
}

demo_beam=16 demo_lm_weight=0.3 demo_word_bonus=1.5
evaluate_demo_test_sets() {
  local run="$1" test_set
  train_lm "$run"
  for test_set in test test-unseen; do
    stamp "evaluation on $corpus/$test_set.tsv, greedy"
    evaluate "$run" "$corpus/$test_set.tsv" "$run/$test_set"
    stamp "evaluation on $corpus/$test_set.tsv, beam search with the 3-gram LM"
    evaluate "$run" "$corpus/$test_set.tsv" "$run/$test_set-beam-lm" --decoder beam \
      --beam "$demo_beam" --lm "$run/lm3.arpa" --lm-weight "$demo_lm_weight" \
      --word-bonus "$demo_word_bonus"
  done
}
