#!/usr/bin/env bash
# End-to-end test of the mpiasr program. Usage: bash train_e2e.sh BUILD_DIR SOURCE_DIR
#
# On a 60-utterance corpus from scripts/make-corpus.sh (cached in the build
# folder): prepare makes the tokenizer and CMVN statistics; `tiny` trains 300
# steps on them and the training loss falls; eval prints a CER and writes one
# hypothesis per test utterance; transcribe prints one line per file; SIGTERM
# stops a run with a checkpoint (exit 143) and the rerun resumes from it;
# under `mpirun -np 2` training runs, resumes and evaluates; bad input exits
# with the code of its kind and names the culprit.
set -euo pipefail
build_dir="$(cd "$1" && pwd)"
source_dir="$(cd "$2" && pwd)"
mpiasr="$build_dir/mpiasr"
work="$build_dir/train_e2e"
corpus="$build_dir/e2e_corpus"
rm -rf "$work"
mkdir -p "$work"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

[[ -x "$mpiasr" ]] || fail "$mpiasr not built"
bash "$source_dir/scripts/make-corpus.sh" --out "$corpus" --utterances 60 --seed 3 \
  --valid-fraction 0.1 --test-fraction 0.1 --jobs 2 >"$work/corpus.log"

common=(--data.train_manifest="$corpus/train.tsv" --data.valid_manifest="$corpus/valid.tsv"
  --data.test_manifest="$corpus/test.tsv" --training.threads=1)

# 1. Prepare (every sample decoded, tokenizer and CMVN made), then train tiny
# for 300 steps on what prepare made; the loss must fall.
out="$work/tiny"
"$mpiasr" prepare "$source_dir/scripts/configs/tiny.yaml" "${common[@]}" --output.dir="$out" \
  >"$work/prepare.log" 2>&1 || { cat "$work/prepare.log"; fail "prepare exited with $?"; }
grep -q "^ready: $out/tokens.txt, $out/cmvn.json" "$work/prepare.log" || fail "prepare: no ready line"
[[ -s "$out/tokens.txt" && -s "$out/cmvn.json" ]] || fail "prepare made no tokenizer or statistics"
"$mpiasr" train "$source_dir/scripts/configs/tiny.yaml" "${common[@]}" --output.dir="$out" \
  --training.max_steps=300 --training.epochs=1000 --training.log_every=25 \
  --validation.every_steps=150 --checkpoint.every_steps=150 >"$work/train.log" 2>&1 ||
  { tail -20 "$work/train.log"; fail "train exited with $?"; }
grep -q '^training done: 300 steps' "$work/train.log" || fail "no 'training done' line"
! grep -q '^tokenizer: ' "$work/train.log" || fail "train remade the tokenizer prepare made"
python3 - "$out/metrics.jsonl" <<'EOF' || fail "loss did not fall"
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
train = [r for r in records if r["kind"] == "train"]
valid = [r for r in records if r["kind"] == "valid"]
first, last = train[0]["loss"], train[-1]["loss"]
print(f"train loss {first:.3f} -> {last:.3f}; valid CER {[round(r['cer'], 3) for r in valid]}")
assert len(train) == 12 and train[-1]["step"] == 300, [r["step"] for r in train]
assert last < 0.75 * first, (first, last)
assert valid and all(0 <= r["cer"] for r in valid)
EOF

# 2. eval: a CER, a hypotheses file with a line per test utterance.
"$mpiasr" eval --ckpt "$out" --manifest "$corpus/test.tsv" --out "$work/hyps.tsv" \
  >"$work/eval.log" 2>&1 || { cat "$work/eval.log"; fail "eval exited with $?"; }
cat "$work/eval.log"
grep -Eq '^CER [0-9]+\.[0-9]+% \([0-9]+ errors / [0-9]+ characters\)$' "$work/eval.log" ||
  fail "eval printed no CER"
grep -Eq '^WER [0-9]+\.[0-9]+%' "$work/eval.log" || fail "eval printed no WER"
tests=$(wc -l <"$corpus/test.tsv")
(($(wc -l <"$work/hyps.tsv") == tests + 1)) || fail "hyps.tsv lacks lines: $(wc -l <"$work/hyps.tsv")"
head -1 "$work/hyps.tsv" | grep -q $'^id\treference\thypothesis\t' || fail "hyps.tsv header"

# 3. transcribe: one "file<TAB>text" line per file on stdout.
mapfile -t files < <(cut -f1 "$corpus/test.tsv" | head -2 | sed "s|^|$corpus/|")
"$mpiasr" transcribe --ckpt "$out/checkpoints/step-00000300" "${files[@]}" \
  >"$work/transcripts.tsv" 2>"$work/transcribe.log" || fail "transcribe exited with $?"
cat "$work/transcripts.tsv"
(($(wc -l <"$work/transcripts.tsv") == 2)) || fail "transcribe printed $(wc -l <"$work/transcripts.tsv") lines"
cut -f1 "$work/transcripts.tsv" | diff - <(printf '%s\n' "${files[@]}") || fail "transcribe file column"

# 4. SIGTERM: the step finishes, a checkpoint is written, exit 128 + 15; the
# rerun resumes from that checkpoint.
out="$work/stopped"
"$mpiasr" train "$source_dir/scripts/configs/tiny.yaml" "${common[@]}" --output.dir="$out" \
  --training.max_steps=100000 --training.epochs=100000 --training.log_every=1 \
  --validation.every_steps=0 --checkpoint.every_steps=0 >"$work/stopped.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
  grep -q '^step ' "$work/stopped.log" && break
  sleep 0.1
done
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
((status == 143)) || { tail "$work/stopped.log"; fail "SIGTERM gave exit $status, not 143"; }
stopped_at=$(sed -n 's/^stopped after step \([0-9]*\);.*/\1/p' "$work/stopped.log")
[[ -n "$stopped_at" ]] || fail "no 'stopped after step' line"
step_dir=$(printf 'step-%08d' "$stopped_at")
[[ -f "$out/checkpoints/$step_dir/model.safetensors" ]] || fail "no checkpoint $step_dir after SIGTERM"
"$mpiasr" train "$source_dir/scripts/configs/tiny.yaml" "${common[@]}" --output.dir="$out" \
  --training.max_steps=100000 --training.epochs=100000 --training.log_every=1 \
  --validation.every_steps=0 --checkpoint.every_steps=0 --stop-at-step=$((stopped_at + 2)) \
  >"$work/resumed.log" 2>&1 || fail "resumed run exited with $?"
grep -q "^resumed from $out/checkpoints/$step_dir: step $stopped_at" "$work/resumed.log" ||
  fail "the rerun did not resume from $step_dir"

# 5. Two ranks: train, resume, evaluate.
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
out="$work/two_ranks"
mpirun -np 2 --oversubscribe "$mpiasr" train "$source_dir/scripts/configs/tiny.yaml" \
  "${common[@]}" --output.dir="$out" --training.max_steps=8 --training.epochs=100 \
  --checkpoint.every_steps=4 \
  >"$work/mpi.log" 2>&1 || { tail "$work/mpi.log"; fail "mpirun train exited with $?"; }
grep -q '^mpiasr train: rank 0/2' "$work/mpi.log" || fail "not two ranks"
grep -q 'global batch = 2 ranks' "$work/mpi.log" || fail "global batch line"
mpirun -np 2 --oversubscribe "$mpiasr" train "$source_dir/scripts/configs/tiny.yaml" \
  "${common[@]}" --output.dir="$out" --training.max_steps=12 --training.epochs=100 \
  --checkpoint.every_steps=4 \
  >"$work/mpi-resume.log" 2>&1 || fail "mpirun resume exited with $?"
grep -q "^resumed from $out/checkpoints/step-00000008: step 8" "$work/mpi-resume.log" ||
  fail "two ranks did not resume from step 8"
grep -q '^training done: 12 steps' "$work/mpi-resume.log" || fail "two ranks did not finish"
mpirun -np 2 --oversubscribe "$mpiasr" eval --ckpt "$out" --manifest "$corpus/test.tsv" \
  --out "$work/mpi-hyps.tsv" >"$work/mpi-eval.log" 2>&1 || fail "mpirun eval exited with $?"
grep -Eq '^CER [0-9]+\.[0-9]+%' "$work/mpi-eval.log" || fail "mpirun eval printed no CER"
(($(wc -l <"$work/mpi-hyps.tsv") == tests + 1)) || fail "two-rank hyps.tsv lacks lines"

# 6. Bad input: the exit code of its kind, the culprit named.
status=0
"$mpiasr" train "$source_dir/scripts/configs/tiny.yaml" --optimzer.lr=1 >"$work/bad.log" 2>&1 ||
  status=$?
((status == 2)) || fail "unknown key gave exit $status, not 2"
grep -q "did you mean 'optimizer.lr'" "$work/bad.log" || fail "no nearest key: $(cat "$work/bad.log")"
printf 'missing.wav\thello\n' >"$work/bad.tsv"
status=0
"$mpiasr" eval --ckpt "$work/tiny" --manifest "$work/bad.tsv" >"$work/bad.log" 2>&1 || status=$?
((status == 3)) || fail "missing audio gave exit $status, not 3"
grep -q "bad.tsv:1" "$work/bad.log" || fail "the manifest line is not named: $(cat "$work/bad.log")"
status=0
"$mpiasr" eval --ckpt "$work/nothing" --manifest "$corpus/test.tsv" >"$work/bad.log" 2>&1 ||
  status=$?
((status == 4)) || fail "a missing checkpoint gave exit $status, not 4"
echo "train_e2e: all checks passed"
