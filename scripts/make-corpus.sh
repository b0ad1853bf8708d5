#!/usr/bin/env bash
# Generates a synthetic English speech corpus with many voices, speeds,
# pitches, noise types and levels, reverb and channels, plus mpiasr manifests.
#
#   1. scripts/corpus_plan.py plans it: DIR/plan.tsv, one line per utterance
#      (split, id, path, sentence, engine, voice, speed, pitch, noise, snr_db,
#      noise_start, reverb, reverberance, gain_db, source, pitch_cents, tempo,
#      room_scale, hf_damping, channel, band_low, band_high), from a seeded RNG
#      with disjoint sentence sets per split. The profile says which splits
#      and how much variety (see --help and corpus_plan.py).
#   2. Each utterance, in parallel chunks run by xargs -P:
#      espeak-ng or flite -> 16 kHz mono -> sox pitch shift and tempo when
#      planned -> + noise at snr_db (noise scaled by the measured RMS of speech
#      and of the noise segment) unless the noise is `none` -> reverb when
#      planned -> band-limiting (sinc) or a telephone channel (300-3400 Hz,
#      8 kHz mu-law and back) when planned -> peak gain to gain_db dBFS ->
#      16-bit FLAC or WAV.
#      Noise is cut at sample noise_start of 120 s noise files made once with
#      `sox -R`, and every sox call runs with -R (seeded dither), so the same
#      seed and options give the same audio, bit for bit.
#   3. corpus_plan.py finish writes DIR/SPLIT.tsv for every split
#      (`relative/path<TAB>transcript`) and prints the hours per split and
#      the variety of each (also in DIR/stats.txt).
#
# Files are written under a temporary name and renamed, so an interrupted run
# resumes with the same command: utterances whose file exists are skipped.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: scripts/make-corpus.sh --out DIR (--hours H | --utterances N) [options]

Generates synthetic speech (espeak-ng, flite, sox) and one manifest per split,
DIR/SPLIT.tsv (relative/path<TAB>transcript).

Profiles:
  demo   DIR/train.tsv, valid.tsv, test.tsv; sizes are shares of the whole.
  wide   DIR/train.tsv (seen voices), valid-seen.tsv, test-seen.tsv (the same
         voices, other sentences), valid-unseen.tsv, test-unseen.tsv (a voice
         family that no other split has: Scottish English, espeak-ng's
         en-gb-scotland with 13 variants of its own and flite's awb, with
         their own sentences); more variety: whisper and croak variants, sox
         pitch shifts and tempo changes, clean speech, rooms of several sizes,
         band-limited and telephone channels.

  --out DIR               output directory (created; rerun to resume)
  --hours H               plan about H hours of audio (wide: of train)
  --utterances N          plan exactly N utterances (wide: of train)
  --profile demo|wide     splits and variety (default demo)
  --seed S                plan seed (default 1); same seed, same corpus
  --jobs J                parallel jobs (default: number of cores)
  --format flac|wav       audio format (default flac)
  --valid-fraction F      demo: share of utterances and sentences for valid (default 0.05)
  --test-fraction F       demo: share for test (default 0.05)
  --valid-utterances N    wide: utterances in each valid split (default 300)
  --test-utterances N     wide: utterances in each test split (default 600)
  --snr-min DB            lowest signal-to-noise ratio (default 10; wide 5)
  --snr-max DB            highest signal-to-noise ratio (default 30)
  --reverb-fraction F     share of utterances with reverb (default 0.3)
  --hold-out-voices       demo: keep the wide profile's held-out family (Scottish
                          English) out of train, valid and test, and add
                          test-unseen.tsv: test's sentences spoken by that family
  -h, --help              this help
EOF
}

die() {
  echo "make-corpus.sh: error: $*" >&2
  exit 2
}

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="" size_args=() jobs="$(nproc)" format=flac
plan_args=()
while (($#)); do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --out | --hours | --utterances | --jobs | --format | --seed | --valid-fraction | \
      --test-fraction | --snr-min | --snr-max | --reverb-fraction | --profile | \
      --valid-utterances | --test-utterances)
      (($# >= 2)) || die "$1 needs a value" ;;&
    --out) out="$2"; shift 2 ;;
    --hours | --utterances) size_args+=("$1" "$2"); shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --format) format="$2"; plan_args+=("$1" "$2"); shift 2 ;;
    --seed | --valid-fraction | --test-fraction | --snr-min | --snr-max | --reverb-fraction | \
      --profile | --valid-utterances | --test-utterances)
      plan_args+=("$1" "$2"); shift 2 ;;
    --hold-out-voices) plan_args+=("$1"); shift ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done
[[ -n "$out" ]] || { usage >&2; die "--out DIR is required"; }
((${#size_args[@]} == 2)) || { usage >&2; die "give exactly one of --hours H, --utterances N"; }
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "--jobs '$jobs' is not a positive integer"
[[ "$format" == flac || "$format" == wav ]] || die "--format '$format' is not flac or wav"
for tool in espeak-ng flite sox /usr/bin/python3; do
  command -v "$tool" >/dev/null || die "$tool not found; run scripts/install-deps.sh"
done

start_seconds=$SECONDS
mkdir -p "$out"
out="$(cd "$out" && pwd)"
echo "planning ${size_args[*]} in $out"
/usr/bin/python3 "$script_dir/corpus_plan.py" plan "$out" "${size_args[@]}" "${plan_args[@]}"
plan="$out/plan.tsv"
total=$(grep -vc -e '^#' -e '^split	' "$plan" || true)

# Noise files: 120 s of each colour at 16 kHz, the same on every run (-R).
noise_seconds=120
mkdir -p "$out/noise"
for colour in white pink brown; do
  if [[ ! -s "$out/noise/$colour.wav" ]]; then
    sox -R -n -r 16000 -c 1 -b 16 "$out/noise/$colour.wav.tmp.wav" \
      synth "$noise_seconds" "${colour}noise" vol 0.5
    mv "$out/noise/$colour.wav.tmp.wav" "$out/noise/$colour.wav"
  fi
done

# Synthesizes one planned utterance into $out/$path (atomically). Arguments:
# the fields of its plan line (split and id, the first two, are not needed).
synth_utterance() {
  local path="$3" sentence="$4" engine="$5" voice="$6" speed="$7"
  local pitch="$8" noise="$9" snr_db="${10}" noise_start="${11}" reverb="${12}"
  local reverberance="${13}" gain_db="${14}" pitch_cents="${16}" tempo="${17}"
  local room_scale="${18}" hf_damping="${19}" channel="${20}" band_low="${21}"
  local band_high="${22}"
  local target="$out/$path"
  [[ -s "$target" ]] && return 0
  local tmp="$chunk_dir/utterance"  # chunk_dir: set by synth_chunk
  case "$engine" in
    espeak-ng) espeak-ng -v "$voice" -s "$speed" -p "$pitch" -w "$tmp.tts.wav" "$sentence" ;;
    flite)
      local pitch_option=()
      [[ "$pitch" == - ]] || pitch_option=(--setf "int_f0_target_mean=$pitch")
      flite -voice "$voice" --setf "duration_stretch=$speed" "${pitch_option[@]}" \
        -t "$sentence" -o "$tmp.tts.wav" ;;
    *) echo "unknown engine '$engine'" >&2; return 1 ;;
  esac
  # 16 kHz mono, pitch-shifted and re-timed when planned; `stat` (at 16 kHz:
  # pitch changes the rate inside the chain) reports the sample count and the
  # RMS of the speech.
  local voice_effects=()
  [[ "$pitch_cents" == 0 ]] || voice_effects+=(pitch "$pitch_cents")
  [[ "$tempo" == 1 ]] || voice_effects+=(tempo "$tempo")
  ((${#voice_effects[@]} == 0)) || voice_effects+=(rate 16000)
  local speech_stat speech_samples speech_rms
  speech_stat=$(sox -R "$tmp.tts.wav" -b 16 "$tmp.speech.wav" channels 1 rate 16000 \
    "${voice_effects[@]}" stat 2>&1) || { echo "sox: $speech_stat" >&2; return 1; }
  if [[ ! "$speech_stat" =~ Samples\ read:\ +([0-9]+).*RMS\ +amplitude:\ +([0-9.e+-]+) ]]; then
    echo "no sample count or RMS in sox stat output: $speech_stat" >&2
    return 1
  fi
  speech_samples="${BASH_REMATCH[1]}" speech_rms="${BASH_REMATCH[2]}"
  # Speech and noise at half level, so their sum cannot clip before `gain -n`.
  local inputs=(-v 0.5 "$tmp.speech.wav")
  if [[ "$noise" != none ]]; then
    if ((noise_start + speech_samples > noise_seconds * 16000)); then
      echo "$speech_samples samples of speech from noise_start $noise_start run past" \
        "the ${noise_seconds} s noise file" >&2
      return 1
    fi
    # The noise segment and its RMS.
    local noise_stat noise_rms
    noise_stat=$(sox -R "$out/noise/$noise.wav" "$tmp.noise.wav" \
      trim "${noise_start}s" "${speech_samples}s" stat 2>&1) ||
      { echo "sox: $noise_stat" >&2; return 1; }
    if [[ ! "$noise_stat" =~ RMS\ +amplitude:\ +([0-9.e+-]+) ]]; then
      echo "no RMS in sox stat output: $noise_stat" >&2
      return 1
    fi
    noise_rms="${BASH_REMATCH[1]}"
    local noise_volume
    noise_volume=$(awk -v s="$speech_rms" -v n="$noise_rms" -v snr="$snr_db" \
      'BEGIN { printf "%.8f", 0.5 * s / (n * 10 ^ (snr / 20)) }')
    inputs=(-m "${inputs[@]}" -v "$noise_volume" "$tmp.noise.wav")
  fi
  local effects=()
  if [[ "$reverb" == yes ]]; then
    effects+=(reverb "$reverberance")
    [[ "$hf_damping" == - ]] || effects+=("$hf_damping" "$room_scale")
  fi
  [[ -d "${target%/*}" ]] || mkdir -p "${target%/*}"
  case "$channel" in
    none)
      sox -R "${inputs[@]}" -b 16 -t "$format" "$target.tmp" "${effects[@]}" gain -n "$gain_db" ;;
    band)
      sox -R "${inputs[@]}" -b 16 -t "$format" "$target.tmp" "${effects[@]}" \
        sinc "$band_low-$band_high" gain -n "$gain_db" ;;
    telephone)
      # The telephone band at 8 kHz, through mu-law and back to 16 kHz.
      local mulaw=(-t raw -e mu-law -b 8 -r 8000 -c 1)
      sox -R "${inputs[@]}" "${mulaw[@]}" "$tmp.mulaw" "${effects[@]}" sinc 300-3400 \
        gain -n -1 rate 8000
      sox -R "${mulaw[@]}" "$tmp.mulaw" -b 16 -t "$format" "$target.tmp" rate 16000 \
        gain -n "$gain_db" ;;
    *) echo "unknown channel '$channel'" >&2; return 1 ;;
  esac
  mv "$target.tmp" "$target"
}

# Synthesizes plan lines FIRST..LAST (line numbers of $plan); reports every
# failed utterance and fails if any did. Each utterance runs in a subshell
# with errexit, outside any condition (where bash would ignore errexit).
synth_chunk() {
  local first="$1" last="$2" failed=0 line_number="$1" status fields
  local chunk_dir="$work_dir/chunk-$first"
  local errors="$chunk_dir/errors"
  mkdir -p "$chunk_dir"
  while IFS= read -r line; do
    IFS=$'\t' read -r -a fields <<<"$line"
    (
      set -euo pipefail
      synth_utterance "${fields[@]}"
    ) 2>"$errors"
    status=$?
    if ((status != 0)); then
      echo "make-corpus.sh: $plan:$line_number: utterance ${fields[1]} failed:" \
        "$(tr '\n' ' ' <"$errors")" >&2
      failed=1
    fi
    line_number=$((line_number + 1))
  done < <(sed -n "${first},${last}p" "$plan")
  rm -r "$chunk_dir"
  return "$failed"
}

# Audio files present: SPLIT/NNNN/ID.FORMAT (the work folder is not searched).
count_done() {
  find "$out" -mindepth 3 -maxdepth 3 -path "$out/.work/*" -prune -o -name "*.$format" -print |
    wc -l
}

work_dir="$out/.work"
mkdir -p "$work_dir"
export out plan format work_dir noise_seconds
export -f synth_utterance synth_chunk

already=$(count_done)
echo "$total utterances planned, $already already present; synthesizing with $jobs jobs"
synth_start=$SECONDS

# Progress every 10 s from a background loop, stopped when synthesis ends.
(
  while sleep 10; do
    done_now=$(count_done)
    elapsed=$((SECONDS - synth_start))
    rate=$(awk -v d=$((done_now - already)) -v t="$elapsed" 'BEGIN { printf "%.1f", d / t }')
    eta=$(awk -v r="$rate" -v left=$((total - done_now)) \
      'BEGIN { if (r > 0) printf "%dm%02ds", left / r / 60, left / r % 60; else print "?" }')
    echo "progress: $done_now/$total utterances, $rate utt/s, ${elapsed}s elapsed, ETA $eta"
  done
) &
progress_pid=$!
trap 'kill "$progress_pid" 2>/dev/null || true' EXIT

# Plan lines start after the two header lines; chunks of up to 40 utterances,
# smaller for small corpora so that every job gets work.
chunk=$(((total + jobs - 1) / jobs))
((chunk <= 40)) || chunk=40
((chunk >= 1)) || chunk=1
synth_status=0
# shellcheck disable=SC2016  # $1 and $2 are expanded by the bash that xargs starts
for ((first = 3; first <= total + 2; first += chunk)); do
  echo "$first $((first + chunk - 1 < total + 2 ? first + chunk - 1 : total + 2))"
done | xargs -P "$jobs" -n 2 bash -c 'synth_chunk "$1" "$2"' _ || synth_status=$?
kill "$progress_pid" 2>/dev/null || true
wait "$progress_pid" 2>/dev/null || true
rmdir "$work_dir" 2>/dev/null || true

synth_seconds=$((SECONDS - synth_start))
made=$(($(count_done) - already))
echo "synthesized $made utterances in ${synth_seconds}s"
finish_status=0
/usr/bin/python3 "$script_dir/corpus_plan.py" finish "$out" || finish_status=$?
echo "wall time: $((SECONDS - start_seconds))s"
((synth_status == 0 && finish_status == 0)) || die "some utterances failed (see above)"
