#!/usr/bin/env bash
# The demo's recipe over several seeds: how much its result is the recipe's
# and how much the seed's. Run it before a change to the sampler, the
# optimizer, the model or the kernels lands, and compare the mean and spread
# with those of main (README "Results" and docs/training-quality.md).
#
# For each seed S: trains `small` as scripts/demo.sh does (2 ranks x 1 thread,
# --steps steps, training.seed S) into OUT/seed-S, evaluates its best
# checkpoint as the demo does (test and test-unseen, greedy and by beam search
# with the 3-gram LM), and keeps the figures; a seed whose folder already
# holds a finished run is evaluated again without training. Then prints one
# row per seed (test CER and WER greedy, the CER of the other three
# evaluations, training wall time, train loss at steps 191-200 as the quality
# guard reads it, valid CER at every validation) and, for each evaluation, the
# mean, sample standard deviation, minimum and maximum of the CER, and writes
# the same as OUT/summary.json.
#
# Usage: bash scripts/seed-sweep.sh [--seeds "1 2 3 4 5"] [--steps 500]
#          [--out runs/seeds] [-- TRAIN_OVERRIDE ...]
# e.g.   bash scripts/seed-sweep.sh --out runs/seeds-unbalanced -- --batching.balance_steps=false
# About 8-10 minutes a seed on an idle 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."

seeds="1 2 3 4 5"
steps=500
out=runs/seeds
overrides=()
while (($#)); do
  case "$1" in
    --seeds) seeds="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --) shift; overrides=("$@"); break ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "seed-sweep.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# shellcheck source=scripts/recipes/common.sh
source scripts/recipes/common.sh
install_and_build
demo_corpus
allow_mpirun_as_root
mkdir -p "$out"

for seed in $seeds; do
  run="$out/seed-$seed"
  stamp "seed $seed: training into $run"
  mpirun -np 2 --oversubscribe "$mpiasr" train scripts/configs/small.yaml \
    --output.dir="$run" --training.threads=1 --training.max_steps="$steps" \
    --training.seed="$seed" "${overrides[@]}" >"$run.train.log"
  grep -E '^(valid step|training done)' "$run.train.log" || true
  evaluate_demo_test_sets "$run" >/dev/null
  grep -H -E '^(CER|WER) ' "$run"/test{,-unseen}{,-beam-lm}-eval.log
done

stamp "summary"
python3 - "$out" "$steps" $seeds <<'EOF'
import json, pathlib, re, statistics, sys

out, steps, seeds = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
EVALUATIONS = {"test": "test greedy", "test-beam-lm": "test beam+LM",
               "test-unseen": "unseen greedy", "test-unseen-beam-lm": "unseen beam+LM"}


def score(log, name):
    return float(re.search(rf"^{name} ([0-9.]+)%", log, re.M).group(1))


rows = []
for seed in seeds:
    run = out / f"seed-{seed}"
    logs = {e: (run / f"{e}-eval.log").read_text() for e in EVALUATIONS}
    valid, losses, seconds = {}, {}, 0.0
    for line in (run / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") == "valid":
            valid[record["step"]] = 100 * record["cer"]
        elif record.get("kind") == "train":
            seconds = max(seconds, record["elapsed_s"])  # wall time trained, resumed runs too
            losses[record["step"]] = record["loss"]
    rows.append({"seed": seed, "test_wer": score(logs["test"], "WER"),
                 "cer": {e: score(log, "CER") for e, log in logs.items()},
                 "train_seconds": seconds, "valid_cer": valid,
                 # The progress record of step 200 holds the mean loss of steps 191-200.
                 "train_loss_191_200": losses.get(200)})
print(f"{'seed':>6} " + " ".join(f"{label:>15}" for label in EVALUATIONS.values()) +
      f" {'test WER':>9} {'train s':>8} {'loss 191-200':>12}  valid CER by step")
for r in rows:
    curve = " ".join(f"{s}:{c:.1f}" for s, c in sorted(r["valid_cer"].items()))
    loss = r["train_loss_191_200"]
    print(f"{r['seed']:>6} " + " ".join(f"{r['cer'][e]:>14.2f}%" for e in EVALUATIONS) +
          f" {r['test_wer']:>8.2f}% {r['train_seconds']:>8.0f} "
          f"{loss if loss is not None else float('nan'):>12.4f}  {curve}")
summary = {}
for e, label in EVALUATIONS.items():
    cers = [r["cer"][e] for r in rows]
    summary[e] = {"seeds": len(cers), "mean": statistics.mean(cers),
                  "stdev": statistics.stdev(cers) if len(cers) > 1 else 0.0,
                  "min": min(cers), "max": max(cers), "spread": max(cers) - min(cers)}
    s = summary[e]
    print(f"{label} CER over {s['seeds']} seeds: mean {s['mean']:.2f}%, sd {s['stdev']:.2f}, "
          f"min {s['min']:.2f}%, max {s['max']:.2f}% (spread {s['spread']:.2f} points)")
summary["mean_train_seconds"] = statistics.mean(r["train_seconds"] for r in rows)
print(f"mean training time {summary['mean_train_seconds']:.0f} s")
(out / "summary.json").write_text(json.dumps({"summary": summary, "runs": rows}, indent=1) + "\n")
EOF
