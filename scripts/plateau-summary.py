#!/usr/bin/env python3
"""When each training run left the CTC blank plateau, and how far its validation CER fell.

  python3 scripts/plateau-summary.py [--json OUT.json] RUN_DIR ...

Each RUN_DIR is a train command's output.dir, trained with
output.diagnostic_steps (docs/training.md); its metrics.jsonl is read. One row
per run:
  reach   the first step where the blank is the most probable output on at
          least 99% of the frames (the run is on the plateau)
  leave   the first step, after 10 such steps in a row, where the blank wins
          on fewer than 80% of the frames ("-" while it never did)
  CER     the validation CER at steps 100, 125, 150 and 200 ("-" where none)
  ratio   the gradient norm of the lowest block (encoder.layers.0) over the
          head's (ctc_head), mean over steps 30-80 (docs/training-quality.md)
--json writes the same rows as a JSON list. A line of metrics.jsonl that is
not a JSON object is an error naming the file and line.
"""

import argparse
import json
import sys

CER_STEPS = (100, 125, 150, 200)
RATIO_STEPS = (30, 80)


def read_records(path):
    records = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                sys.exit(f"plateau-summary: {path}:{number}: not JSON ({error})")
            if not isinstance(record, dict):
                sys.exit(f"plateau-summary: {path}:{number}: not a JSON object")
            records.append(record)
    return records


def reach_step(diagnostics):
    return next((r["step"] for r in diagnostics if r["blank_argmax"] >= 0.99), None)


def leave_step(diagnostics):
    on_plateau = 0
    for r in diagnostics:
        if on_plateau >= 10:
            if r["blank_argmax"] < 0.8:
                return r["step"]
        else:
            on_plateau = on_plateau + 1 if r["blank_argmax"] >= 0.99 else 0
    return None


def gradient_ratio(diagnostics):
    window = [r for r in diagnostics if RATIO_STEPS[0] <= r["step"] <= RATIO_STEPS[1]]
    if len(window) < RATIO_STEPS[1] - RATIO_STEPS[0] + 1:
        return None
    return sum(r["grad_norms"]["encoder.layers.0"] / r["grad_norms"]["ctc_head"]
               for r in window) / len(window)


def summarize(run):
    records = read_records(f"{run}/metrics.jsonl")
    diagnostics = [r for r in records if r.get("kind") == "diagnostics"]
    if not diagnostics:
        sys.exit(f"plateau-summary: {run}/metrics.jsonl has no diagnostics lines "
                 "(train with output.diagnostic_steps)")
    valid = {r["step"]: 100 * r["cer"] for r in records if r.get("kind") == "valid"}
    return {"run": run, "reach": reach_step(diagnostics), "leave": leave_step(diagnostics),
            "valid_cer": {s: valid[s] for s in CER_STEPS if s in valid},
            "ratio": gradient_ratio(diagnostics)}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json")
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR")
    args = parser.parse_args()
    rows = [summarize(run) for run in args.runs]
    width = max(len(r["run"]) for r in rows)
    print(f"{'run':{width}s} reach leave  valid CER at " + " / ".join(map(str, CER_STEPS)) +
          "  ratio")
    for r in rows:
        cers = " / ".join(f"{r['valid_cer'][s]:5.1f}" if s in r["valid_cer"] else "  -  "
                          for s in CER_STEPS)
        ratio = f"{r['ratio']:.4f}" if r["ratio"] is not None else "-"
        print(f"{r['run']:{width}s} {r['reach'] or '-':>5} {r['leave'] or '-':>5}  "
              f"{cers}  {ratio}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
