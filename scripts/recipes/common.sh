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
#                              for bit on every machine
#   allow_mpirun_as_root       lets OpenMPI start as root (it refuses unless told)
#   evaluate CKPT MANIFEST PREFIX [EVAL OPTION...]
#                              CER and WER of a checkpoint on a manifest with two
#                              ranks of one thread: PREFIX-eval.log (the eval
#                              output) and PREFIX-hypotheses.tsv; the options
#                              go to `mpiasr eval` (e.g. --decoder beam)
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
  if [[ -s $corpus/test.tsv ]]; then
    stamp "corpus: using $corpus"
  else
    stamp "corpus: generating about 4 hours of speech into $corpus"
    bash scripts/make-corpus.sh --out "$corpus" --hours 4 --seed 1 --jobs "$(nproc)"
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
