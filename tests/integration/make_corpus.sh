#!/usr/bin/env bash
# Integration test of scripts/make-corpus.sh, scripts/corpus_plan.py and
# scripts/plot-metrics. Usage: bash make_corpus.sh BUILD_DIR SOURCE_DIR
#
# Demo profile: generates a 20-utterance corpus and checks the manifests
# (count per split, paths that exist, transcripts of 5-20 words of [a-z' ]
# from the word list), every file's format with soxi (16 kHz, mono, 16-bit
# FLAC, 0.5-20 s), resume (a deleted file is made again, bit for bit, and the
# plan is unchanged); then, on a 2000-utterance plan: disjoint train/valid/test
# sentences, split sizes, planned ranges (SNR, reverb share, voices that exist
# in espeak-ng's data), the 20-utterance plan being its prefix, another seed
# giving another plan, and a plan written before the wide profile's columns
# still being accepted for the same options and refused for others. With
# --hold-out-voices: test-unseen has test's sentences in test's order, its
# voices are in no other split, a larger plan extends it, and the wide
# profile refuses the option.
# Wide profile: a 24-utterance corpus in five splits (manifests, formats,
# telephone and band-limited files without energy above their band, a
# deleted telephone file made again bit for bit); on a larger plan: sizes,
# sentences disjoint across the five splits, the held-out voices (no base
# voice, variant or flite voice of an -unseen split in any other split),
# ranges and shares of the added variety, and a larger train set leaving the
# valid and test splits as they were. Finally plot-metrics on a synthetic
# metrics file, against steps and against minutes.
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

# check_manifests CORPUS SPLIT=COUNT...: line counts, paths, transcripts,
# and every file's format and duration read back with soxi.
check_manifests() {
  local corpus="$1" split count manifest lines path transcript extra words files=()
  shift
  : >"$work/transcript_words"
  for pair in "$@"; do
    split="${pair%=*}" count="${pair#*=}"
    manifest="$corpus/$split.tsv"
    [[ -f "$manifest" ]] || fail "$manifest missing"
    lines=$(wc -l <"$manifest")
    ((lines == count)) || fail "$manifest has $lines lines, expected $count"
    while IFS=$'\t' read -r path transcript extra; do
      [[ -z "$extra" ]] || fail "$manifest: more than two fields: $path"
      [[ "$path" == "$split/"*.flac ]] || fail "$manifest: path '$path' not under $split/"
      [[ -s "$corpus/$path" ]] || fail "$manifest: $corpus/$path missing"
      [[ "$transcript" =~ ^[a-z\']+(\ [a-z\']+)*$ ]] ||
        fail "$manifest: bad transcript '$transcript'"
      read -r -a words <<<"$transcript"
      ((${#words[@]} >= 5 && ${#words[@]} <= 20)) ||
        fail "$manifest: ${#words[@]} words: $transcript"
      printf '%s\n' "${words[@]}" >>"$work/transcript_words"
      files+=("$corpus/$path")
    done <"$manifest"
  done
  local unknown
  unknown=$(comm -23 <(sort -u "$work/transcript_words") <(sort -u "$work/words"))
  [[ -z "$unknown" ]] || fail "transcript words not in the word list: $unknown"
  local query option value bad
  for query in "-r 16000" "-c 1" "-b 16" "-t flac"; do
    read -r option value <<<"$query"
    bad=$(soxi "$option" "${files[@]}" | grep -vcx -- "$value" || true)
    ((bad == 0)) || fail "$bad files without soxi $option = $value"
  done
  soxi -D "${files[@]}" | awk '$1 < 0.5 || $1 > 20 { print "FAIL: duration " $1 " s"; bad = 1 }
    END { exit bad }' || fail "durations outside 0.5-20 s"
}
declare -A expected=([train]=16 [valid]=2 [test]=2)
check_manifests "$corpus" train=16 valid=2 test=2
mapfile -t files < <(cut -f1 "$corpus"/{train,valid,test}.tsv | sed "s|^|$corpus/|")

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

# A plan written before the wide profile's columns were added (its first 14)
# is still accepted for the same options, and refused for other ones.
mkdir -p "$work/old_plan"
cut -f1-14 "$corpus/plan.tsv" >"$work/old_plan/plan.tsv"
/usr/bin/python3 "$corpus_plan" plan "$work/old_plan" --utterances 20 --seed 7 \
  --valid-fraction 0.1 --test-fraction 0.1 || fail "a plan without the new columns was refused"
cut -f1-14 "$corpus/plan.tsv" >"$work/old_plan/plan.tsv"
if /usr/bin/python3 "$corpus_plan" plan "$work/old_plan" --utterances 20 --seed 8 \
  --valid-fraction 0.1 --test-fraction 0.1 2>"$work/old_plan.err"; then
  fail "a plan without the new columns was accepted for another seed"
fi
grep -q "planned otherwise" "$work/old_plan.err" || fail "no 'planned otherwise' error"

# split_voices PLAN SPLIT...: the base voices, variants and flite voices that
# speak in the SPLITs of PLAN, each marked by kind, one per line, sorted.
split_voices() {
  local plan="$1"
  shift
  awk -F '\t' -v splits="$*" 'BEGIN {
    n = split(splits, names, " "); for (i = 1; i <= n; i++) wanted[names[i]] = 1 }
    NR > 2 && ($1 in wanted) {
    if ($5 == "flite") print "flite " $6
    else { split($6, v, "+"); print "base " v[1]; print "variant " v[2] } }' "$plan" | sort -u
}

# Demo profile with --hold-out-voices: test-unseen speaks test's sentences,
# in test's order, with voices no other split has, and leaves no trace in the
# other splits' sizes; a larger plan extends it; the wide profile refuses it.
held_options=(--utterances 10 --seed 7 --valid-fraction 0.1 --test-fraction 0.2 --hold-out-voices)
bash "$make_corpus" --out "$work/held" "${held_options[@]}" --jobs 2 >"$work/held.log" ||
  { cat "$work/held.log"; fail "make-corpus.sh --hold-out-voices exited non-zero"; }
check_manifests "$work/held" train=7 valid=1 test=2 test-unseen=2
cmp <(cut -f2 "$work/held/test.tsv") <(cut -f2 "$work/held/test-unseen.tsv") ||
  fail "test-unseen's transcripts are not test's"
held_big="$work/held_big"
/usr/bin/python3 "$corpus_plan" plan "$held_big" --utterances 2000 --seed 7 \
  --valid-fraction 0.1 --test-fraction 0.1 --hold-out-voices
awk -F '\t' 'NR > 2 { count[$1]++ } END {
  if (count["train"] != 1600 || count["valid"] != 200 || count["test"] != 200 ||
      count["test-unseen"] != 200) {
    print "FAIL: split sizes " count["train"] "/" count["valid"] "/" count["test"] "/" \
      count["test-unseen"]; exit 1 } }' "$held_big/plan.tsv" || fail "held-out split sizes"
for split in test test-unseen; do
  awk -F '\t' -v s="$split" 'NR > 2 && $1 == s { print $4 }' "$held_big/plan.tsv" \
    >"$work/held_$split.sentences"
done
cmp "$work/held_test.sentences" "$work/held_test-unseen.sentences" ||
  fail "test-unseen's sentences are not test's, in test's order"
split_voices "$held_big/plan.tsv" test-unseen >"$work/held_unseen.voices"
split_voices "$held_big/plan.tsv" train valid test >"$work/held_seen.voices"
shared=$(comm -12 "$work/held_seen.voices" "$work/held_unseen.voices")
[[ -z "$shared" ]] || fail "held-out voices also in train, valid or test: $shared"
grep -q '^flite ' "$work/held_unseen.voices" && grep -q '^base ' "$work/held_unseen.voices" ||
  fail "test-unseen should have espeak-ng and flite voices: $(cat "$work/held_unseen.voices")"
(($(grep -c '^variant ' "$work/held_seen.voices") >= 60)) || fail "fewer than 60 seen variants"
/usr/bin/python3 "$corpus_plan" plan "$held_big" --utterances 2400 --seed 7 \
  --valid-fraction 0.1 --test-fraction 0.1 --hold-out-voices ||
  fail "a larger --hold-out-voices plan did not extend the smaller one"
if /usr/bin/python3 "$corpus_plan" plan "$work/held_wide" --profile wide --utterances 20 \
  --hold-out-voices 2>"$work/held_wide.err"; then
  fail "the wide profile accepted --hold-out-voices"
fi
grep -q "for the demo profile" "$work/held_wide.err" || fail "no error naming the demo profile"

# Wide profile: five splits, formats, channels, resume of a telephone file.
wide_options=(--profile wide --utterances 12 --valid-utterances 3 --test-utterances 3 --seed 5
  --jobs 2)
wide="$work/wide"
bash "$make_corpus" --out "$wide" "${wide_options[@]}" | tee "$work/wide_log"
grep -q '^total: *24 utterances' "$work/wide_log" || fail "no summary line for 24 utterances"
check_manifests "$wide" train=12 valid-seen=3 test-seen=3 valid-unseen=3 test-unseen=3
[[ -s "$wide/stats.txt" ]] || fail "no $wide/stats.txt"
# Energy above a channel's band, as a share of the RMS: the band's upper edge
# (3400 Hz for telephone) plus 800 Hz, through sox's steep sinc high-pass.
above_band() {
  local total high
  total=$(sox "$1" -n stat 2>&1 | awk '/RMS +amplitude/ { print $3 }')
  high=$(sox "$1" -n sinc "$2" stat 2>&1 | awk '/RMS +amplitude/ { print $3 }')
  awk -v h="$high" -v t="$total" 'BEGIN { print h / t }'
}
declare -A channels=()
while IFS=$'\t' read -r path channel band_high; do
  channels[$channel]=1
  case "$channel" in
    telephone) cutoff=4200 ;;
    band) cutoff=$((band_high + 800)) ;;
    *) continue ;;
  esac
  share=$(above_band "$wide/$path" "$cutoff")
  awk -v s="$share" 'BEGIN { exit !(s < 0.01) }' ||
    fail "$path ($channel, up to ${band_high} Hz): $share of its RMS above $cutoff Hz"
done < <(awk -F '\t' 'NR > 2 { print $3 "\t" $20 "\t" $22 }' "$wide/plan.tsv")
((${#channels[@]} == 3)) || fail "seed 5 should plan all three channels: ${!channels[*]}"
victim="$wide/$(awk -F '\t' 'NR > 2 && $20 == "telephone" && $16 != 0 { print $3; exit }' \
  "$wide/plan.tsv")"
[[ -f "$victim" ]] || fail "no pitch-shifted telephone utterance to delete"
cp "$victim" "$work/wide_victim.flac"
rm "$victim"
bash "$make_corpus" --out "$wide" "${wide_options[@]}" >"$work/wide_log2"
cmp "$victim" "$work/wide_victim.flac" || fail "regenerated $victim differs from the first run"

# A larger wide plan: sizes, disjoint sentences, held-out voices, variety.
wide_big="$work/wide_big"
/usr/bin/python3 "$corpus_plan" plan "$wide_big" --profile wide --utterances 3000 \
  --valid-utterances 200 --test-utterances 300 --seed 5
wide_splits=(train valid-seen test-seen valid-unseen test-unseen)
awk -F '\t' 'NR > 2 { count[$1]++ } END {
  if (count["train"] != 3000 || count["valid-seen"] != 200 || count["test-seen"] != 300 ||
      count["valid-unseen"] != 200 || count["test-unseen"] != 300) {
    print "FAIL: split sizes"; for (s in count) print s, count[s]; exit 1 } }' \
  "$wide_big/plan.tsv" || fail "wide split sizes"
for split in "${wide_splits[@]}"; do
  repeated=$(awk -F '\t' -v s="$split" 'NR > 2 && $1 == s { print $4 }' "$wide_big/plan.tsv" |
    sort | uniq -d | wc -l)
  [[ "$split" == train ]] || ((repeated == 0)) || fail "$repeated sentences twice in $split"
  awk -F '\t' -v s="$split" 'NR > 2 && $1 == s { print $4 }' "$wide_big/plan.tsv" | sort -u \
    >"$work/$split.sentences"
  split_voices "$wide_big/plan.tsv" "$split" >"$work/$split.voices"
done
for a in "${wide_splits[@]}"; do
  for b in "${wide_splits[@]}"; do
    [[ "$a" < "$b" ]] || continue
    shared=$(comm -12 "$work/$a.sentences" "$work/$b.sentences" | wc -l)
    ((shared == 0)) || fail "$shared sentences in both $a and $b"
  done
done
# lm-text.txt: every sentence train speaks, none that a valid or test split
# speaks, and the rest of the pool (far more than the 3,000 of train).
LC_ALL=C sort -cu "$wide_big/lm-text.txt" || fail "lm-text.txt is not sorted, once each"
sort -u "$wide_big/lm-text.txt" >"$work/lm.sentences"
missing=$(comm -23 "$work/train.sentences" "$work/lm.sentences" | wc -l)
((missing == 0)) || fail "$missing train sentences not in lm-text.txt"
for split in valid-seen test-seen valid-unseen test-unseen; do
  shared=$(comm -12 "$work/$split.sentences" "$work/lm.sentences" | wc -l)
  ((shared == 0)) || fail "$shared sentences of $split in lm-text.txt"
done
(($(wc -l <"$wide_big/lm-text.txt") > 100000)) || fail "lm-text.txt has too few sentences"
sort -u "$work"/{train,valid-seen,test-seen}.voices >"$work/seen.voices"
sort -u "$work"/{valid-unseen,test-unseen}.voices >"$work/unseen.voices"
shared=$(comm -12 "$work/seen.voices" "$work/unseen.voices")
[[ -z "$shared" ]] || fail "held-out voices also in seen splits: $shared"
if ! grep -q '^flite ' "$work/unseen.voices" || ! grep -q '^base ' "$work/unseen.voices"; then
  fail "the unseen splits should have espeak-ng and flite voices: $(cat "$work/unseen.voices")"
fi
(($(grep -c '^variant ' "$work/unseen.voices") >= 5)) || fail "fewer than 5 held-out variants"
(($(grep -c '^variant ' "$work/train.voices") >= 60)) || fail "fewer than 60 train variants"
flite_voices=$(flite -lv)
awk -F '\t' 'NR > 2 && $5 == "espeak-ng" { sub(/^[^+]*\+/, "", $6); print $6 }' \
  "$wide_big/plan.tsv" | sort -u | while IFS= read -r variant; do
  [[ -f "$espeak_data/voices/!v/$variant" ]] || fail "espeak-ng variant '$variant' not installed"
done
awk -F '\t' 'NR > 2 && $5 == "flite" { print $6 }' "$wide_big/plan.tsv" | sort -u |
  while read -r voice; do
    [[ " $flite_voices " == *" $voice "* ]] || fail "flite voice '$voice' not in: $flite_voices"
  done
awk -F '\t' 'function near(share, target) { return share > target - 0.03 && share < target + 0.03 }
  NR > 2 {
  n++
  if ($9 == "none") clean++
  else if ($9 != "white" && $9 != "pink" && $9 != "brown" || $10 < 5 || $10 > 30) {
    print "FAIL: noise " $9 " at " $10 " dB"; exit 1 }
  if ($16 != 0) { shifted++; if ($16 < -300 || $16 > 300) { print "FAIL: cents " $16; exit 1 } }
  if ($17 != 1) { timed++; if ($17 < 0.85 || $17 > 1.15) { print "FAIL: tempo " $17; exit 1 } }
  if ($12 == "yes" && ($18 < 20 || $18 > 100 || $19 < 10 || $19 > 90)) {
    print "FAIL: room " $18 " damping " $19; exit 1 }
  channel[$20]++
  if ($20 == "band" && !($21 >= 100 && $21 <= 400 && $22 >= 3000 && $22 <= 7000)) {
    print "FAIL: band " $21 "-" $22; exit 1 }
  if ($15 != "fortunes" && $15 != "wordnet-base" && $15 != "dict-gcide") {
    print "FAIL: source " $15; exit 1 } }
  END {
    if (!near(clean / n, 0.1) || !near(shifted / n, 0.5) || !near(timed / n, 0.3) ||
        !near(channel["telephone"] / n, 0.2) || !near(channel["band"] / n, 0.25)) {
      print "FAIL: shares clean " clean / n " pitch " shifted / n " tempo " timed / n \
        " telephone " channel["telephone"] / n " band " channel["band"] / n; exit 1 } }' \
  "$wide_big/plan.tsv" || fail "wide variety out of range"
# A larger train set (by hours) leaves the valid and test splits as they
# were, and the small train split is its prefix.
/usr/bin/python3 "$corpus_plan" plan "$work/wide_hours" --profile wide --hours 0.2 \
  --valid-utterances 3 --test-utterances 3 --seed 5
for split in "${wide_splits[@]}"; do
  awk -F '\t' -v s="$split" 'NR > 2 && $1 == s' "$wide/plan.tsv" >"$work/small_split"
  head -n "$(wc -l <"$work/small_split")" \
    <(awk -F '\t' -v s="$split" 'NR > 2 && $1 == s' "$work/wide_hours/plan.tsv") |
    cmp - "$work/small_split" || fail "the 12-utterance wide $split is not the prefix of 0.2 h's"
done
(($(awk -F '\t' 'NR > 2 && $1 == "train"' "$work/wide_hours/plan.tsv" | wc -l) > 100)) ||
  fail "0.2 h of train planned too few utterances"

# plot-metrics on synthetic metrics: full, and with only train lines.
/usr/bin/python3 - >"$work/metrics.jsonl" <<'EOF'
import json
import math
for step in range(10, 1001, 10):
    print(json.dumps({"kind": "train", "step": step, "epoch": step / 400,
                      "loss": 3.0 * math.exp(-step / 300) + 0.2, "lr": 1e-3 * min(1, step / 100),
                      "grad_norm": 1.0, "utt_per_s": 20, "audio_s_per_s": 75,
                      "elapsed_s": 1.5 * step}))
    if step % 100 == 0:
        print(json.dumps({"kind": "valid", "step": step, "loss": 2.5 * math.exp(-step / 300) + 0.3,
                          "cer": 0.8 * math.exp(-step / 400), "wer": 0.9 * math.exp(-step / 500),
                          "elapsed_s": 1.5 * step + 4}))
EOF
grep '"train"' "$work/metrics.jsonl" >"$work/train_only.jsonl"
for metrics in metrics train_only; do
  for x in step minutes; do
    png="$work/$metrics-$x.png"
    "$source_dir/scripts/plot-metrics" --x "$x" --valid-name valid-unseen \
      "$work/$metrics.jsonl" "$png"
    [[ -s "$png" ]] || fail "$png missing or empty"
    [[ "$(head -c 4 "$png" | tail -c 3)" == PNG ]] || fail "$png is not a PNG"
  done
done

echo "make_corpus: all checks passed"
