#!/usr/bin/env bash
# Integration test of scripts/make-corpus.sh, scripts/corpus_plan.py and
# scripts/plot-metrics. Usage: bash make_corpus.sh BUILD_DIR SOURCE_DIR
#
# Generates a 20-utterance corpus and checks: the manifests (count per split,
# paths that exist, transcripts of 5-20 words of [a-z' ] from the word list),
# every file's format with soxi (16 kHz, mono, 16-bit FLAC, 0.5-20 s), resume
# (a deleted file is made again, bit for bit, and the plan is unchanged);
# then, on a 2000-utterance plan: disjoint train/valid/test sentences, split
# sizes, planned ranges (SNR, reverb share, voices that exist in espeak-ng's
# data), the 20-utterance plan being its prefix, and another seed giving
# another plan; finally plot-metrics on a synthetic metrics file.
set -euo pipefail
build_dir="$(cd "$1" && pwd)"
source_dir="$(cd "$2" && pwd)"
work="$build_dir/make_corpus_test"
rm -rf "$work"
mkdir -p "$work"
make_corpus="$source_dir/scripts/make-corpus.sh"
corpus_plan="$source_dir/scripts/corpus_plan.py"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

options=(--utterances 20 --seed 7 --valid-fraction 0.1 --test-fraction 0.1 --jobs 2)
corpus="$work/corpus"
bash "$make_corpus" --out "$corpus" "${options[@]}" | tee "$work/log"
grep -q '^total: *20 utterances' "$work/log" || fail "no summary line for 20 utterances"
grep -q '^wall time: ' "$work/log" || fail "no wall time line"

# Lower-case words of the word list (the reference for the transcripts).
grep -E "^[a-z']+$" /usr/share/dict/american-english >"$work/words"
grep -E "^I('[a-z]+)?$" /usr/share/dict/american-english | tr I i >>"$work/words"

# Manifests: line counts, paths, transcripts.
declare -A expected=([train]=16 [valid]=2 [test]=2)
for split in train valid test; do
  manifest="$corpus/$split.tsv"
  [[ -f "$manifest" ]] || fail "$manifest missing"
  lines=$(wc -l <"$manifest")
  ((lines == expected[$split])) || fail "$manifest has $lines lines, expected ${expected[$split]}"
  while IFS=$'\t' read -r path transcript extra; do
    [[ -z "$extra" ]] || fail "$manifest: more than two fields: $path"
    [[ "$path" == "$split/"*.flac ]] || fail "$manifest: path '$path' not under $split/"
    [[ -s "$corpus/$path" ]] || fail "$manifest: $corpus/$path missing"
    [[ "$transcript" =~ ^[a-z\']+(\ [a-z\']+)*$ ]] || fail "$manifest: bad transcript '$transcript'"
    read -r -a words <<<"$transcript"
    ((${#words[@]} >= 5 && ${#words[@]} <= 20)) || fail "$manifest: ${#words[@]} words: $transcript"
    printf '%s\n' "${words[@]}" >>"$work/transcript_words"
    echo "$corpus/$path" >>"$work/files"
  done <"$manifest"
done
unknown=$(comm -23 <(sort -u "$work/transcript_words") <(sort -u "$work/words"))
[[ -z "$unknown" ]] || fail "transcript words not in the word list: $unknown"

# Audio format of every file, read back with soxi.
mapfile -t files <"$work/files"
for query in "-r 16000" "-c 1" "-b 16" "-t flac"; do
  read -r option value <<<"$query"
  bad=$(soxi "$option" "${files[@]}" | grep -vcx -- "$value" || true)
  ((bad == 0)) || fail "$bad files without soxi $option = $value"
done
soxi -D "${files[@]}" | awk '$1 < 0.5 || $1 > 20 { print "FAIL: duration " $1 " s"; bad = 1 }
  END { exit bad }' || fail "durations outside 0.5-20 s"

# Resume: a deleted file is made again, bit for bit; the plan is unchanged.
victim="${files[3]}"
cp "$victim" "$work/victim.flac"
cp "$corpus/plan.tsv" "$work/plan_before.tsv"
rm "$victim"
bash "$make_corpus" --out "$corpus" "${options[@]}" | tee "$work/log2"
grep -q '20 utterances planned, 19 already present' "$work/log2" || fail "resume did not skip 19"
cmp "$victim" "$work/victim.flac" || fail "regenerated $victim differs from the first run"
cmp "$corpus/plan.tsv" "$work/plan_before.tsv" || fail "plan changed for the same seed"

# A larger plan with the same seed: disjoint sentences per split, sizes, ranges.
big="$work/big"
/usr/bin/python3 "$corpus_plan" plan "$big" --utterances 2000 --seed 7 \
  --valid-fraction 0.1 --test-fraction 0.1 --snr-min 10 --snr-max 30 --reverb-fraction 0.3
awk -F '\t' 'NR > 2 { count[$1]++ } END {
  if (count["train"] != 1600 || count["valid"] != 200 || count["test"] != 200) {
    print "FAIL: split sizes " count["train"] "/" count["valid"] "/" count["test"]; exit 1 } }' \
  "$big/plan.tsv" || fail "split sizes"
for split in train valid test; do
  awk -F '\t' -v s="$split" 'NR > 2 && $1 == s { print $4 }' "$big/plan.tsv" | sort -u \
    >"$work/$split.sentences"
done
for pair in "train valid" "train test" "valid test"; do
  read -r a b <<<"$pair"
  shared=$(comm -12 "$work/$a.sentences" "$work/$b.sentences" | wc -l)
  ((shared == 0)) || fail "$shared sentences in both $a and $b"
done
awk -F '\t' 'NR > 2 {
  if ($9 != "white" && $9 != "pink" && $9 != "brown") { print "FAIL: noise " $9; exit 1 }
  if ($10 < 10 || $10 > 30) { print "FAIL: snr " $10; exit 1 }
  if ($5 != "espeak-ng" && $5 != "flite") { print "FAIL: engine " $5; exit 1 }
  reverb += ($12 == "yes"); n++ }
  END { if (reverb / n < 0.25 || reverb / n > 0.35) { print "FAIL: reverb share " reverb / n; exit 1 } }' \
  "$big/plan.tsv" || fail "planned values out of range"
espeak_data=$(espeak-ng --version | sed -n 's/.*Data at: //p')
awk -F '\t' 'NR > 2 && $5 == "espeak-ng" { sub(/^[^+]*\+/, "", $6); print $6 }' "$big/plan.tsv" |
  sort -u | while IFS= read -r variant; do
  [[ -f "$espeak_data/voices/!v/$variant" ]] || fail "espeak-ng variant '$variant' not installed"
done
for split in train valid test; do
  head -n "${expected[$split]}" <(awk -F '\t' -v s="$split" 'NR > 2 && $1 == s' "$big/plan.tsv") \
    >"$work/big_prefix"
  awk -F '\t' -v s="$split" 'NR > 2 && $1 == s' "$corpus/plan.tsv" | cmp - "$work/big_prefix" ||
    fail "the 20-utterance $split plan is not the prefix of the 2000-utterance one"
done
/usr/bin/python3 "$corpus_plan" plan "$work/other_seed" --utterances 20 --seed 8 \
  --valid-fraction 0.1 --test-fraction 0.1
if cmp -s <(tail -n +2 "$corpus/plan.tsv") <(tail -n +2 "$work/other_seed/plan.tsv"); then
  fail "seeds 7 and 8 gave the same plan"
fi

# plot-metrics on synthetic metrics: full, and with only train lines.
/usr/bin/python3 - >"$work/metrics.jsonl" <<'EOF'
import json
import math
for step in range(10, 1001, 10):
    print(json.dumps({"kind": "train", "step": step, "epoch": step / 400,
                      "loss": 3.0 * math.exp(-step / 300) + 0.2, "lr": 1e-3 * min(1, step / 100),
                      "grad_norm": 1.0, "utt_per_s": 20, "audio_s_per_s": 75}))
    if step % 100 == 0:
        print(json.dumps({"kind": "valid", "step": step, "loss": 2.5 * math.exp(-step / 300) + 0.3,
                          "cer": 0.8 * math.exp(-step / 400), "wer": 0.9 * math.exp(-step / 500)}))
EOF
grep '"train"' "$work/metrics.jsonl" >"$work/train_only.jsonl"
for metrics in metrics train_only; do
  "$source_dir/scripts/plot-metrics" "$work/$metrics.jsonl" "$work/$metrics.png"
  [[ -s "$work/$metrics.png" ]] || fail "$metrics.png missing or empty"
  [[ "$(head -c 4 "$work/$metrics.png" | tail -c 3)" == PNG ]] || fail "$metrics.png is not a PNG"
done

echo "make_corpus: all checks passed"
