#!/usr/bin/env bash
# Decoding memory does not grow with the file: `mpiasr transcribe` of 10
# minutes and of 2 hours of audio (a second of a tone with noise repeated,
# 22.05 kHz so that it is resampled) with a `tiny` checkpoint trained one step; peak RSS
# (/usr/bin/time's maximum resident set size) for 2 hours must be within
# 10% of that for 10 minutes. A memory figure, not a timing. Before the
# features were streamed (io/feature_stream.h) each minute of audio took
# about 5.6 MB more (docs/decoding.md, "Memory").
# Usage: bash decode_memory.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
# shellcheck source=tests/integration/lib/train_runs.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/train_runs.sh"
train_setup "$1" "$2" decode_memory

run_ok "$work/train.log" "$mpiasr" train "$tiny" "${tiny_options[@]}" --training.max_steps=1 \
  --output.dir="$work/run"

# peak_rss_kb MINUTES: the peak RSS of transcribing MINUTES of audio, in kB.
peak_rss_kb() {
  local audio="$work/$1min.wav"
  # One second of a tone with noise, repeated (sox takes half a minute
  # of CPU to synthesize two hours).
  /usr/bin/python3 - "$audio" "$1" <<'PYTHON'
import math, random, struct, sys, wave
random.seed(1)
rate = 22050
second = b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * 300 * t / rate)
                                        + random.randint(-2000, 2000))) for t in range(rate))
with wave.open(sys.argv[1], "wb") as out:
    out.setnchannels(1)
    out.setsampwidth(2)
    out.setframerate(rate)
    for _ in range(60 * int(sys.argv[2])):
        out.writeframes(second)
PYTHON
  /usr/bin/time -v -o "$work/$1min.time" "$mpiasr" transcribe --ckpt "$work/run" --threads 1 \
    "$audio" >"$work/$1min.out" 2>"$work/$1min.err" ||
    { tail -n 20 "$work/$1min.err" >&2; fail "transcribe of $1 minutes"; }
  rm -f "$audio"
  (($(wc -l <"$work/$1min.out") == 1)) || fail "transcribe of $1 minutes printed no transcript"
  awk -F': ' '/Maximum resident set size/ {print $2}' "$work/$1min.time"
}

short=$(peak_rss_kb 10)
long=$(peak_rss_kb 120)
echo "peak RSS: 10 min $((short / 1024)) MiB, 120 min $((long / 1024)) MiB"
((long * 10 <= short * 11)) ||
  fail "peak RSS for 2 hours ($long kB) is more than 10% over that for 10 minutes ($short kB)"
