#!/usr/bin/env bash
# The mpiasr program against a hostile user: bad command lines, unreadable
# and broken files, impossible settings. Each case checks the exit code of
# its kind (2 usage or config, 3 input data, 4 checkpoint, 6 diverged) and
# that the message names the culprit, or that the program copes (exit 0).
# Uses the corpus of train_e2e.sh and a tiny checkpoint trained here.
# Usage: bash hostile_input.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
# shellcheck source=tests/integration/lib/train_runs.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/train_runs.sh"
train_setup "$1" "$2" hostile_input

# A tiny model to evaluate: two steps are enough.
model="$work/model"
run_ok "$work/model.log" "$mpiasr" train "$tiny" "${tiny_options[@]}" --training.max_steps=2 \
  --output.dir="$model"
ckpt="$model/checkpoints/step-00000002"

# copy_checkpoint NAME PYTHON: a copy of the checkpoint as $work/NAME/step-00000002
# whose model.safetensors tensors (float32 arrays, by name) PYTHON changes in
# place, with state.json's size and CRC32 made to match, so the files are intact.
copy_checkpoint() {
  rm -rf "${work:?}/$1"
  mkdir -p "$work/$1"
  cp -r "$ckpt" "$work/$1/"
  /usr/bin/python3 - "$work/$1/step-00000002" "$2" <<'PYTHON'
import json, struct, sys, zlib
import numpy as np
folder, change = sys.argv[1], sys.argv[2]
path = folder + "/model.safetensors"
data = bytearray(open(path, "rb").read())
(n,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + n])
tensors = {}
for name, entry in header.items():
    if name != "__metadata__":
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(data, np.float32, (end - begin) // 4, 8 + n + begin)
exec(change)
open(path, "wb").write(data)
state = json.load(open(folder + "/state.json"))
state["files"]["model.safetensors"] = {"size": len(data), "crc32": "%08x" % zlib.crc32(data)}
json.dump(state, open(folder + "/state.json", "w"), indent=2)
PYTHON
}

# Unknown command: named, with the nearest one.
expect_exit 2 unknown_command "$mpiasr" trian "$tiny"
expect_line "$work/unknown_command.log" \
  "^mpiasr: error: unknown command 'trian'; did you mean 'train'\? \(commands: import, prepare, train, eval, transcribe, lm, average\)$" \
  "unknown command"

# Thread counts: bounded by the cores this process may use, never negative
# (a huge count crashed inside OpenMP; a negative one was taken).
cores=$(nproc)
expect_exit 2 threads_negative "$mpiasr" eval --ckpt "$work/none" --manifest "$corpus/test.tsv" \
  --threads -1
expect_line "$work/threads_negative.log" "--threads: Value -1 not in range 0 to 4096" "eval --threads -1"
expect_exit 2 threads_huge "$mpiasr" transcribe --ckpt "$work/none" --threads 100000 x.wav
expect_line "$work/threads_huge.log" "--threads: Value 100000 not in range 0 to 4096" \
  "transcribe --threads 100000"
expect_exit 2 threads_cores "$mpiasr" eval --ckpt "$work/none" --manifest "$corpus/test.tsv" \
  --threads $((cores + 1))
expect_line "$work/threads_cores.log" \
  "error: --threads = $((cores + 1)): expected 1 to $cores, the cores this process may use" \
  "eval --threads cores + 1"
expect_exit 2 training_threads "$mpiasr" train "$tiny" "${tiny_options[@]}" \
  --training.threads=$((cores + 1)) --output.dir="$work/threads"
expect_line "$work/training_threads.log" \
  "error: training.threads = $((cores + 1)): expected 1 to $cores, the cores this process may use" \
  "train --training.threads=cores + 1"
expect_exit 2 examples "$mpiasr" eval --ckpt "$work/none" --manifest "$corpus/test.tsv" \
  --examples -5

# A diverged model: NaN weights fail at load, naming the tensor; finite
# weights that overflow fail at the first log-probability (exit 6, not a
# CER with "loss 0.0000").
copy_checkpoint nan_weights 'tensors["ctc_head.weight"][3] = np.nan'
expect_exit 6 nan_weights "$mpiasr" eval --ckpt "$work/nan_weights" --manifest "$corpus/test.tsv"
expect_line "$work/nan_weights.log" \
  "error: checkpoint $work/nan_weights/step-00000002: model.safetensors: tensor 'ctc_head.weight' holds 1 non-finite values \(NaN or infinity\)" \
  "NaN weights"
copy_checkpoint huge_weights 'tensors["ctc_head.weight"][:] = 3e38'
expect_exit 6 huge_weights "$mpiasr" eval --ckpt "$work/huge_weights" --manifest "$corpus/test.tsv"
expect_line "$work/huge_weights.log" \
  "error: utterance .*: the model.s log-probabilities are not finite \(-?(nan|inf) at output frame 0\)" \
  "overflowing weights"

# Doctored CMVN statistics (state.json's size and CRC32 made to match, so
# the files are intact): none of them from any audio, each refused at load
# with exit 4, naming the file and the field; they used to fail an
# assertion (frames 0) or decode garbage features (a mean of 1e308).
doctor_cmvn() {
  rm -rf "${work:?}/$1"
  mkdir -p "$work/$1"
  cp -r "$ckpt" "$work/$1/"
  /usr/bin/python3 - "$work/$1/step-00000002" "$2" <<'PYTHON'
import json, sys, zlib
folder, change = sys.argv[1], sys.argv[2]
state = json.load(open(folder + "/state.json"))
name = state["cmvn_file"]
cmvn = json.load(open(folder + "/" + name))
exec(change)
data = json.dumps(cmvn).encode()
open(folder + "/" + name, "wb").write(data)
state["files"][name] = {"size": len(data), "crc32": "%08x" % zlib.crc32(data)}
json.dump(state, open(folder + "/state.json", "w"), indent=2)
PYTHON
}
doctor_cmvn cmvn_frames 'cmvn["frames"] = 0'
expect_exit 4 cmvn_frames "$mpiasr" eval --ckpt "$work/cmvn_frames" --manifest "$corpus/test.tsv"
expect_line "$work/cmvn_frames.log" \
  "error: checkpoint $work/cmvn_frames/step-00000002: cmvn: $work/cmvn_frames/step-00000002/cmvn.json: frames 0: statistics of at least one frame are needed" \
  "CMVN of 0 frames"
doctor_cmvn cmvn_mean 'cmvn["sum"][5] = 1e308'
expect_exit 4 cmvn_mean "$mpiasr" transcribe --ckpt "$work/cmvn_mean" \
  "$corpus/$(head -n 1 "$corpus/test.tsv" | cut -f1)"
expect_line "$work/cmvn_mean.log" \
  "error: checkpoint $work/cmvn_mean/step-00000002: cmvn: $work/cmvn_mean/step-00000002/cmvn.json: bin 5: sum 1e\+308 / frames [0-9]+ = mean [0-9.e+]+, outside \[-103.28, 88.73\]" \
  "CMVN mean of 1e308"

# eval does what its errors suggest: --data.skip_bad drops bad utterances,
# --data.data_root fills in \$data_root.
{ sed -n 1,2p "$corpus/test.tsv" | sed "s|^|$corpus/|"; printf 'missing.wav\tgone\n'; } >"$work/bad.tsv"
expect_exit 3 eval_bad "$mpiasr" eval --ckpt "$ckpt" --manifest "$work/bad.tsv"
expect_line "$work/eval_bad.log" "bad.tsv:3: audio file '$work/missing.wav': file not found" \
  "eval: the bad line"
expect_line "$work/eval_bad.log" "fix them, or drop them with data.skip_bad=true" "eval: the advice"
expect_exit 0 eval_skip "$mpiasr" eval --ckpt "$ckpt" --manifest "$work/bad.tsv" \
  --data.skip_bad=true
expect_line "$work/eval_skip.log" "^eval: kept 2 of 3 utterances, dropped 1:" "eval --data.skip_bad"
expect_line "$work/eval_skip.log" "^decoded 2 utterances" "eval --data.skip_bad: decoded"
sed -n 1,2p "$corpus/test.tsv" | sed 's|^|$data_root/|' >"$work/rooted.tsv"
expect_exit 0 eval_root "$mpiasr" eval --ckpt "$ckpt" --manifest "$work/rooted.tsv" \
  --data.data_root="$corpus"
expect_line "$work/eval_root.log" "^decoded 2 utterances" "eval --data.data_root"
expect_exit 0 transcribe_skip "$mpiasr" transcribe --ckpt "$ckpt" --data.skip_bad=true \
  "$corpus/$(head -n 1 "$corpus/test.tsv" | cut -f1)" "$work/missing.wav"
expect_line "$work/transcribe_skip.log" "^transcribe: skipped 1 of 2 files:" \
  "transcribe --data.skip_bad"
expect_line "$work/transcribe_skip.log" "^  audio file '$work/missing.wav': file not found" \
  "transcribe --data.skip_bad: the file"
# Without it: the files named as files (not as lines of a "manifest
# 'command line'"), and the option that skips them.
expect_exit 3 transcribe_missing "$mpiasr" transcribe --ckpt "$ckpt" "$work/missing.wav"
expect_line "$work/transcribe_missing.log" \
  "error: 1 of 1 files cannot be transcribed; fix them, or skip them with --data.skip_bad=true:$" \
  "transcribe: a missing file"
expect_line "$work/transcribe_missing.log" "^  audio file '$work/missing.wav': file not found" \
  "transcribe: the missing file"
! grep -q "command line" "$work/transcribe_missing.log" || fail "transcribe: 'command line' named"

# Files: each failure in words, with the exit code of whose file it is.
expect_exit 2 config_folder "$mpiasr" train "$work" "${tiny_options[@]}"
expect_line "$work/config_folder.log" "error: config file '$work': is a folder, not a file" \
  "config folder"
touch "$work/plain"
expect_exit 2 output_folder "$mpiasr" train "$tiny" "${tiny_options[@]}" \
  --output.dir="$work/plain/run"
expect_line "$work/output_folder.log" \
  "error: output.dir '$work/plain/run': cannot create the folder: a part of the path is not a folder" \
  "output folder"
ln -sf loop_b.wav "$work/loop_a.wav"
ln -sf loop_a.wav "$work/loop_b.wav"
printf '%s\thello\n' "$work/loop_a.wav" >"$work/loop.tsv"
expect_exit 3 symlink_loop "$mpiasr" eval --ckpt "$ckpt" --manifest "$work/loop.tsv"
expect_line "$work/symlink_loop.log" \
  "loop.tsv:1: audio file '$work/loop_a.wav': a symbolic link loop \(too many levels of symbolic links\)" \
  "symlink loop"
# Permission: as root (who reads anything) the program runs as user nobody.
as_user=()
if [[ $(id -u) == 0 ]]; then as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups); fi
cp "$corpus/$(head -n 1 "$corpus/test.tsv" | cut -f1)" "$work/locked.flac"
chmod -R a+rX "$work" "$model"
chmod 000 "$work/locked.flac"
printf '%s\thello\n' "$work/locked.flac" >"$work/locked.tsv"
expect_exit 3 permission "${as_user[@]}" env HOME=/tmp "$mpiasr" eval --ckpt "$ckpt" \
  --manifest "$work/locked.tsv"
expect_line "$work/permission.log" "locked.tsv:1: audio file '$work/locked.flac': permission denied" \
  "permission denied"
# Checkpoints: a step folder with a broken state.json says so; a garbled
# best and latest pointer do not hide the intact checkpoint.
cp -r "$model/checkpoints" "$work/broken"
rm "$work/broken/step-00000002/state.json"
expect_exit 4 no_state "$mpiasr" eval --ckpt "$work/broken/step-00000002" \
  --manifest "$corpus/test.tsv"
expect_line "$work/no_state.log" \
  "error: checkpoint $work/broken/step-00000002 is not intact: state.json is missing" "no state.json"
cp -r "$model/checkpoints" "$work/pointer"
echo garbage >"$work/pointer/best"
echo garbage >"$work/pointer/latest"
expect_exit 0 garbled_latest "$mpiasr" eval --ckpt "$work/pointer" --manifest "$corpus/test.tsv"
expect_line "$work/garbled_latest.log" "^$work/pointer/latest: expected a folder name like step-00001000" \
  "garbled pointers: reported"
expect_line "$work/garbled_latest.log" "^checkpoint: $work/pointer/step-00000002 \(step 2\)" \
  "garbled pointers: the intact checkpoint"
# What is wrong with checkpoints passed over goes to stderr, with the errors
# that point to it ("reported above"), not among eval's results on stdout.
expect_line "$work/garbled_latest.err" "^$work/pointer/latest: expected a folder name" \
  "garbled pointers: on stderr"
! grep -q "expected a folder name" "$work/garbled_latest.out" || fail "garbled pointers on stdout"
cp -r "$model/checkpoints" "$work/broken_all"
rm "$work/broken_all/step-00000002/state.json"
expect_exit 4 train_broken "$mpiasr" train "$tiny" "${tiny_options[@]}" --training.max_steps=1 \
  --output.dir="$work/broken_run" --checkpoint.dir="$work/broken_all"
expect_line "$work/train_broken.err" \
  "checkpoint $work/broken_all/step-00000002 is not intact: state.json is missing" \
  "train over broken checkpoints: the folder on stderr"
expect_line "$work/train_broken.err" "1 step folder\(s\) are not intact \(each is reported above\)" \
  "train over broken checkpoints: the error"
! grep -q "not intact" "$work/train_broken.out" || fail "train: 'not intact' on stdout"
# checkpoint.resume=never over checkpoints says what becomes of them.
cp -r "$model" "$work/never"
expect_exit 0 resume_never "$mpiasr" train "$tiny" "${tiny_options[@]}" --training.max_steps=1 \
  --output.dir="$work/never" --checkpoint.resume=never
expect_line "$work/resume_never.out" \
  "^starting from scratch \(checkpoint.resume = never\); the 1 step folders in $work/never/checkpoints \(steps 2 to 2\) are not resumed" \
  "checkpoint.resume=never over a checkpoint"

# Utterances too short for the model: prepare finds them (file:line, exit 3)
# or drops them with data.skip_bad; transcribe gives a very short file an
# empty transcript and a warning.
sox -n -r 16000 -c 1 -b 16 "$work/short.wav" synth 0.04 sine 300
{ sed "s|^|$corpus/|" "$corpus/train.tsv"; printf '%s\thello there\n' "$work/short.wav"; } \
  >"$work/short.tsv"
short_line=$(wc -l <"$work/short.tsv")
expect_exit 3 prepare_short "$mpiasr" prepare "$tiny" "${tiny_options[@]}" \
  --data.train_manifest="$work/short.tsv" --output.dir="$work/prepare_short"
expect_line "$work/prepare_short.log" \
  "short.tsv:$short_line: audio file '$work/short.wav': too short: 0.040 s gives 4 feature frames, none after the x4 subsampling" \
  "prepare: short utterance"
expect_exit 0 prepare_skip "$mpiasr" prepare "$tiny" "${tiny_options[@]}" \
  --data.train_manifest="$work/short.tsv" --output.dir="$work/prepare_skip" --data.skip_bad=true
expect_line "$work/prepare_skip.log" "^train: dropped 1 utterances too short for the model:" \
  "prepare --data.skip_bad"
# eval scores it, and names it among those left out of the loss.
{ sed -n 1,2p "$corpus/test.tsv" | sed "s|^|$corpus/|"; printf '%s\thello there\n' "$work/short.wav"; } \
  >"$work/eval_short.tsv"
expect_exit 0 eval_short "$mpiasr" eval --ckpt "$ckpt" --manifest "$work/eval_short.tsv"
expect_line "$work/eval_short.log" \
  "^1 utterances are shorter than their transcript allows and are left out of the loss:$" \
  "eval: the infeasible count"
expect_line "$work/eval_short.log" "^  $work/eval_short.tsv:3: audio file '$work/short.wav': 0.04 s for 11 tokens$" \
  "eval: the infeasible utterance"
# Utterances over data.max_utterance_seconds are dropped by name, the first
# 20 of them, against the lengths sox reads.
long_lines=()
line=0
while IFS=$'\t' read -r path _; do
  line=$((line + 1))
  if awk -v d="$(soxi -D "$corpus/$path")" 'BEGIN { exit !(d > 2.5) }'; then long_lines+=("$line"); fi
done <"$corpus/train.tsv"
((${#long_lines[@]} > 20)) || fail "only ${#long_lines[@]} training utterances over 2.5 s"
expect_exit 0 prepare_long "$mpiasr" prepare "$tiny" "${tiny_options[@]}" \
  --data.max_utterance_seconds=2.5 --output.dir="$work/prepare_long"
expect_line "$work/prepare_long.log" \
  "^train: dropped ${#long_lines[@]} utterances longer than data.max_utterance_seconds = 2.5 s:$" \
  "prepare: the long utterances"
for line in "${long_lines[@]:0:20}"; do
  expect_line "$work/prepare_long.log" "^  $corpus/train.tsv:$line: audio file '.*' lasts [0-9.]+ s$" \
    "prepare: long utterance at line $line"
done
expect_line "$work/prepare_long.log" "^  \.\.\. and $((${#long_lines[@]} - 20)) more$" \
  "prepare: how many more"
[[ $(grep -c "^  $corpus/train.tsv:" "$work/prepare_long.log") == 20 ]] ||
  fail "prepare: not 20 long utterances named"
expect_exit 0 transcribe_short "$mpiasr" transcribe --ckpt "$ckpt" "$work/short.wav"
expect_line "$work/transcribe_short.log" "^$work/short.wav	$" "transcribe: an empty transcript"
expect_line "$work/transcribe_short.log" \
  "^transcribe: warning: $work/short.wav: too short: .*; its transcript is empty$" \
  "transcribe: the warning"

# A WAV whose data chunk says 0.5 s while 1 s of samples follows: read as
# far as its header says, with a warning naming both lengths (it used to
# be read so without a word).
sox -n -r 16000 -c 1 -b 16 "$work/data_past.wav" synth 1 sine 300
printf '\x80\x3e\x00\x00' | dd of="$work/data_past.wav" bs=1 seek=40 conv=notrunc status=none
expect_exit 0 data_past "$mpiasr" transcribe --ckpt "$ckpt" "$work/data_past.wav"
expect_line "$work/data_past.log" \
  "^transcribe: warning: .*audio file '$work/data_past.wav': data past its data chunk: the header says 16000 bytes of samples \(0.500 s\), the file holds 32000 \(1.000 s\)" \
  "data past the data chunk: the warning"
expect_line "$work/data_past.log" "^$work/data_past.wav	" "data past the data chunk: transcribed"

# Long audio: eval and transcribe decode a 10-minute file in windows, in the
# memory of the model's plan (a model planned for the whole file asked for
# tens of GB); the peak resident memory stays under 600 MB.
sox -n -r 16000 -c 1 -b 16 "$work/long.wav" synth 600 pinknoise vol 0.1
printf '%s\thello there\n' "$work/long.wav" >"$work/long.tsv"
expect_exit 0 eval_long /usr/bin/time -f "peak %M KB" "$mpiasr" eval --ckpt "$ckpt" \
  --manifest "$work/long.tsv"
expect_exit 0 transcribe_long /usr/bin/time -f "peak %M KB" "$mpiasr" transcribe --ckpt "$ckpt" \
  "$work/long.wav"
for name in eval_long transcribe_long; do
  expect_line "$work/$name.log" "utterances over 30.0 s are decoded in windows" "$name: windows"
  peak=$(sed -n 's/^peak \([0-9]*\) KB$/\1/p' "$work/$name.log")
  echo "  $name: peak resident memory $((peak / 1024)) MB"
  ((peak < 600 * 1024)) || fail "$name: peak resident memory $((peak / 1024)) MB, not under 600 MB"
done
expect_line "$work/eval_long.log" "^decoded 1 utterances, 0.17 h of audio" "eval_long: decoded"
expect_line "$work/transcribe_long.log" "^$work/long.wav	" "transcribe_long: a line"

echo "hostile_input: all checks passed"
