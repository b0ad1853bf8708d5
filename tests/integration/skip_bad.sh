#!/usr/bin/env bash
# data.skip_bad in every command. Audio whose samples are NaN or infinite
# has a sound header, so only decoding finds it: with skip_bad, prepare,
# train, eval and transcribe all decode every sample first, drop such a file
# and name its manifest line, and the same utterances are dropped whether or
# not prepare ran first (train alone makes prepare's tokenizer and CMVN
# statistics, byte for byte, without the dropped transcripts). Without
# skip_bad each command stops with exit 3 naming the manifest line.
# Usage: bash skip_bad.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
# shellcheck source=tests/integration/lib/train_runs.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/train_runs.sh"
train_setup "$1" "$2" skip_bad

# One second of a tone as 32-bit float WAVs, one with a NaN at frame 800
# (0.05 s), one with an infinity at frame 1600 (0.1 s): headers libsndfile
# reads without complaint.
/usr/bin/python3 - "$work" <<'PYTHON'
import math, struct, sys
def write_float_wav(path, samples, rate=16000):
    data = struct.pack("<%df" % len(samples), *samples)
    fmt = struct.pack("<HHIIHH", 3, 1, rate, rate * 4, 4, 32)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", len(data)) + data
    open(path, "wb").write(b"RIFF" + struct.pack("<I", len(body)) + body)
tone = [0.3 * math.sin(0.05 * i) for i in range(16000)]
for name, frame, value in (("nan", 800, float("nan")), ("inf", 1600, float("inf"))):
    samples = list(tone)
    samples[frame] = value
    write_float_wav(f"{sys.argv[1]}/{name}.wav", samples)
PYTHON

# And 40 ms of audio, too short for the model (no frame after the x4
# subsampling), which the length check after the tokenizer drops.
sox -n -r 16000 -c 1 -b 16 "$work/short.wav" synth 0.04 sine 300

# The training set with nan.wav at line 3, inf.wav at line 8 and short.wav
# at line 9; their transcripts hold what the corpus lacks: z and digits.
grep -q '[z0-9]' <(cut -f2 "$corpus/train.tsv") && fail "the corpus has a 'z' or a digit"
{
  sed -n 1,2p "$corpus/train.tsv" | sed "s|^|$corpus/|"
  printf '%s\tzigzag\n' "$work/nan.wav"
  sed -n 3,6p "$corpus/train.tsv" | sed "s|^|$corpus/|"
  printf '%s\tzero\n' "$work/inf.wav"
  printf '%s\tin 2026\n' "$work/short.wav"
  sed -n '7,$p' "$corpus/train.tsv" | sed "s|^|$corpus/|"
} >"$work/bad.tsv"
total=$(wc -l <"$work/bad.tsv")
nan_line="(bad|strict).tsv:3: audio file '$work/nan.wav': non-finite sample \(nan\) at frame 800 \(0.05 s\)"
inf_line="bad.tsv:8: audio file '$work/inf.wav': non-finite sample \(inf\) at frame 1600 \(0.1 s\)"
short_line="bad.tsv:9: audio file '$work/short.wav': too short: 0.040 s gives 4 feature frames, none"
options=("${tiny_options[@]}" --data.train_manifest="$work/bad.tsv" --training.max_steps=1)

# Without skip_bad (and without the short file, which the length check
# would stop at first): train stops (exit 3) naming the line, although it
# reads only headers at start-up (the CMVN statistics decode the audio).
sed 9d "$work/bad.tsv" >"$work/strict.tsv"
expect_exit 3 train_strict "$mpiasr" train "$tiny" "${options[@]}" --output.dir="$work/strict" \
  --data.train_manifest="$work/strict.tsv"
expect_line "$work/train_strict.log" "$nan_line" "train without skip_bad: the NaN line"

# train alone, with skip_bad: the three dropped, named, before anything is
# built from the rest.
expect_exit 0 train_alone "$mpiasr" train "$tiny" "${options[@]}" --data.skip_bad=true \
  --output.dir="$work/alone"
expect_line "$work/train_alone.log" "^train: kept $((total - 2)) of $total utterances, dropped 2:" \
  "train --data.skip_bad: the summary"
expect_line "$work/train_alone.log" "$nan_line" "train --data.skip_bad: the NaN line"
expect_line "$work/train_alone.log" "$inf_line" "train --data.skip_bad: the infinity line"
expect_line "$work/train_alone.log" "^train: dropped 1 utterances too short for the model:" \
  "train --data.skip_bad: the short utterance"
expect_line "$work/train_alone.log" "$short_line" "train --data.skip_bad: the short line"
# The vocabulary is that of the utterances kept, made after the drops.
grep -q '^[z0-9] ' "$work/alone/tokens.txt" &&
  fail "train --data.skip_bad: the vocabulary has the dropped transcripts' letters"

# prepare, then train: the same utterances dropped, the same files made.
expect_exit 0 prepare "$mpiasr" prepare "$tiny" "${options[@]}" --data.skip_bad=true \
  --output.dir="$work/prepared"
expect_line "$work/prepare.log" "$nan_line" "prepare --data.skip_bad: the NaN line"
expect_line "$work/prepare.log" "$inf_line" "prepare --data.skip_bad: the infinity line"
expect_line "$work/prepare.log" "$short_line" "prepare --data.skip_bad: the short line"
for file in tokens.txt cmvn.json; do
  cmp "$work/alone/$file" "$work/prepared/$file" ||
    fail "$file: train alone made another file than prepare"
done
expect_exit 0 train_prepared "$mpiasr" train "$tiny" "${options[@]}" --data.skip_bad=true \
  --output.dir="$work/prepared"
expect_line "$work/train_prepared.log" "$nan_line" "train after prepare: the NaN line"
expect_line "$work/train_prepared.log" "^train: $((total - 2)) utterances" \
  "train after prepare: the utterances kept"
ckpt="$work/alone/checkpoints/step-00000001"

# eval: the bad lines of a test manifest dropped with skip_bad, else exit 3.
{
  printf '%s\tzigzag\n' "$work/nan.wav"
  sed "s|^|$corpus/|" "$corpus/test.tsv"
  printf '%s\tzero\n' "$work/inf.wav"
} >"$work/test.tsv"
tests=$(wc -l <"$corpus/test.tsv")
expect_exit 3 eval_strict "$mpiasr" eval --ckpt "$ckpt" --manifest "$work/test.tsv"
expect_line "$work/eval_strict.log" "test.tsv:1\): audio file '$work/nan.wav': non-finite sample" \
  "eval without skip_bad: the NaN line"
expect_exit 0 eval_skip "$mpiasr" eval --ckpt "$ckpt" --manifest "$work/test.tsv" \
  --data.skip_bad=true
expect_line "$work/eval_skip.log" "^eval: kept $tests of $((tests + 2)) utterances, dropped 2:" \
  "eval --data.skip_bad: the summary"
expect_line "$work/eval_skip.log" "test.tsv:1: audio file '$work/nan.wav': non-finite sample" \
  "eval --data.skip_bad: the NaN line"
expect_line "$work/eval_skip.log" "test.tsv:$((tests + 2)): audio file '$work/inf.wav': non-finite" \
  "eval --data.skip_bad: the infinity line"
expect_line "$work/eval_skip.log" "^decoded $tests utterances" "eval --data.skip_bad: decoded"

# transcribe: the good files printed on stdout, the bad ones named on stderr.
good="$corpus/$(head -n 1 "$corpus/test.tsv" | cut -f1)"
expect_exit 3 transcribe_strict "$mpiasr" transcribe --ckpt "$ckpt" "$work/nan.wav" "$good"
expect_line "$work/transcribe_strict.err" "audio file '$work/nan.wav': non-finite sample" \
  "transcribe without skip_bad: the NaN file"
expect_exit 0 transcribe_skip "$mpiasr" transcribe --ckpt "$ckpt" --data.skip_bad=true \
  "$work/nan.wav" "$good" "$work/inf.wav"
[[ $(cut -f1 "$work/transcribe_skip.out") == "$good" ]] ||
  fail "transcribe --data.skip_bad: stdout should have one line, for $good: $(cat "$work/transcribe_skip.out")"
expect_line "$work/transcribe_skip.err" "^transcribe: skipped 2 of 3 files:" \
  "transcribe --data.skip_bad: the summary"
expect_line "$work/transcribe_skip.err" "^  audio file '$work/inf.wav': non-finite sample \(inf\)" \
  "transcribe --data.skip_bad: the infinity file"

echo "skip_bad: all checks passed"
