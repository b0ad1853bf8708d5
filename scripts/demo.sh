#!/usr/bin/env bash
# The mpiasr demo, from a fresh clone to a trained recognizer on one machine:
#   1. installs the dependencies (scripts/install-deps.sh) and builds the
#      program, Release, CPU only, in build-demo/;
#   2. generates about 4 hours of synthetic speech in data/corpus
#      (scripts/make-corpus.sh --hold-out-voices; skipped when it is already
#      there): train, valid and test without one voice family (Scottish
#      English), and test-unseen, test's sentences spoken by that family;
#   3. trains the `small` Conformer-CTC (scripts/configs/small.yaml) on the CPU
#      with two MPI ranks of one thread each, for a fixed number of steps
#      (about 10 minutes on an idle 2-core machine), into runs/demo;
#   4. evaluates the best checkpoint on the test set (voices training heard)
#      and on test-unseen (the same sentences, voices it did not): CER, WER
#      and a few reference/hypothesis pairs, decoded greedily and then by beam
#      search with a 3-gram language model of the training transcripts (its
#      weight and word bonus chosen on the validation set, see
#      docs/decoding.md);
#   5. draws the training curves into runs/demo/metrics.png;
#   6. writes the headline figures to runs/demo/results.json: CER and WER
#      (percent) on seen and on unseen voices, greedy and with beam search and
#      the LM, the steps and the
#      wall time trained (metrics.jsonl's last line, resumed runs included),
#      the commit (git rev-parse --short HEAD; "unknown" outside a checkout)
#      and whether the tree differed from it (git status: tracked changes or
#      untracked files that are not ignored), the date (UTC) and the CPU.
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

demo_corpus

allow_mpirun_as_root
out=runs/demo
stamp "training: 2 ranks x 1 thread, $steps steps, into $out"
train_start=$SECONDS
mpirun -np 2 --oversubscribe "$mpiasr" train scripts/configs/small.yaml \
  --output.dir="$out" --training.threads=1 --training.max_steps="$steps"
train_seconds=$((SECONDS - train_start))

evaluate_demo_test_sets "$out"

stamp "metrics plot"
scripts/plot-metrics "$out/metrics.jsonl" "$out/metrics.png"
echo "training curves: $out/metrics.png"

stamp "results: $out/results.json"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=null
if [[ $commit != unknown ]]; then
  if [[ -n $(git status --porcelain 2>/dev/null) ]]; then dirty=true; else dirty=false; fi
fi
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
/usr/bin/python3 - "$out" "$corpus" "$commit" "$dirty" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  "${cpu:-unknown}" "$demo_beam" "$demo_lm_weight" "$demo_word_bonus" <<'EOF'
import json, re, sys
out, corpus, commit, dirty, date, cpu, beam, lm_weight, word_bonus = sys.argv[1:]


def scores(log):
    text = open(log).read()
    cer = re.search(r"^CER ([0-9.]+)%", text, re.M)
    wer = re.search(r"^WER ([0-9.]+)%", text, re.M)
    decoded = re.search(r"^decoded ([0-9]+) utterances", text, re.M)
    if not cer or not wer:
        sys.exit("demo.sh: no CER or WER line in " + log)
    return ({"cer_percent": float(cer.group(1)), "wer_percent": float(wer.group(1))},
            int(decoded.group(1)) if decoded else None)


def test_set(name):
    greedy, utterances = scores(f"{out}/{name}-eval.log")
    beam_lm, _ = scores(f"{out}/{name}-beam-lm-eval.log")
    beam_lm.update(beam=int(beam), lm_order=3, lm_weight=float(lm_weight),
                   word_bonus=float(word_bonus))
    return {"manifest": f"{corpus}/{name}.tsv", "utterances": utterances, "greedy": greedy,
            "beam_lm": beam_lm}


last = {}
for line in open(out + "/metrics.jsonl"):
    if line.strip():
        last = json.loads(line)
results = {
    "seen_voices": test_set("test"), "unseen_voices": test_set("test-unseen"),
    "steps": last.get("step"), "train_wall_seconds": last.get("elapsed_s"),
    "commit": commit, "dirty": json.loads(dirty), "date": date, "cpu": cpu,
}
with open(out + "/results.json", "w") as f:
    json.dump(results, f, indent=2)
    f.write("\n")
EOF

stamp "done"
echo "training wall time: ${train_seconds}s; total: ${SECONDS}s"
for test_set in test test-unseen; do
  [[ $test_set == test ]] && voices="voices training heard" || voices="voices training did not hear"
  echo "$test_set ($voices), greedy decoding:"
  grep -E '^(CER|WER) ' "$out/$test_set-eval.log"
  echo "$test_set ($voices), beam search with the 3-gram LM:"
  grep -E '^(CER|WER) ' "$out/$test_set-beam-lm-eval.log"
done
echo "per-utterance hypotheses: $out/test{,-unseen}{,-beam-lm}-hypotheses.tsv; checkpoints: $out/checkpoints"
echo "figures: $out/results.json (commit $commit)"
