#!/usr/bin/env bash
# The demo's recipe over several seeds: how much its result is the recipe's
# and how much the seed's. Run it before a change to the sampler, the
# optimizer, the model or the kernels lands, and compare the mean and spread
# with those of main (README "Results" and docs/training-quality.md).
#
# For each seed S: trains `small` as scripts/demo.sh does (2 ranks x 1 thread,
# --steps steps, training.seed S) into OUT/seed-S, evaluates its best
# checkpoint greedily on the test set, and keeps the figures; a seed whose
# folder already holds a finished run is evaluated again without training.
# Then prints one row per seed (test CER and WER, training wall time, valid
# CER at every validation, train loss at the middle step) and the mean,
# sample standard deviation, minimum and maximum of the test CER, and writes
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
  stamp "seed $seed: evaluation on the test set"
  evaluate "$run" "$corpus/test.tsv" "$run/test" >/dev/null
  grep -E '^(CER|WER) ' "$run/test-eval.log"
done

stamp "summary"
python3 - "$out" "$steps" $seeds <<'EOF'
import json, pathlib, re, statistics, sys

out, steps, seeds = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
rows = []
for seed in seeds:
    run = out / f"seed-{seed}"
    log = (run / "test-eval.log").read_text()
    cer = float(re.search(r"^CER ([0-9.]+)%", log, re.M).group(1))
    wer = float(re.search(r"^WER ([0-9.]+)%", log, re.M).group(1))
    valid, loss_mid, seconds = {}, None, 0.0
    for line in (run / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") == "valid":
            valid[record["step"]] = 100 * record["cer"]
        elif record.get("kind") == "train":
            seconds = max(seconds, record["elapsed_s"])  # wall time trained, resumed runs too
            if record["step"] <= steps // 2:
                loss_mid = record["loss"]
    rows.append({"seed": seed, "test_cer": cer, "test_wer": wer, "train_seconds": seconds,
                 "valid_cer": valid, "train_loss_mid": loss_mid})
print(f"{'seed':>6} {'test CER':>9} {'test WER':>9} {'train s':>8} {'loss@' + str(steps // 2):>9}"
      "  valid CER by step")
for r in rows:
    curve = " ".join(f"{s}:{c:.1f}" for s, c in sorted(r["valid_cer"].items()))
    print(f"{r['seed']:>6} {r['test_cer']:>8.2f}% {r['test_wer']:>8.2f}% {r['train_seconds']:>8.0f} "
          f"{r['train_loss_mid'] or float('nan'):>9.3f}  {curve}")
cers = [r["test_cer"] for r in rows]
summary = {"seeds": len(cers), "mean": statistics.mean(cers),
           "stdev": statistics.stdev(cers) if len(cers) > 1 else 0.0,
           "min": min(cers), "max": max(cers), "spread": max(cers) - min(cers)}
summary["mean_train_seconds"] = statistics.mean(r["train_seconds"] for r in rows)
print(f"test CER over {summary['seeds']} seeds: mean {summary['mean']:.2f}%, "
      f"sd {summary['stdev']:.2f}, min {summary['min']:.2f}%, max {summary['max']:.2f}% "
      f"(spread {summary['spread']:.2f} points); mean training time "
      f"{summary['mean_train_seconds']:.0f} s")
(out / "summary.json").write_text(json.dumps({"summary": summary, "runs": rows}, indent=1) + "\n")
EOF
