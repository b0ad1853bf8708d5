#!/usr/bin/env bash
# The corpus importers, `mpiasr lm`, `mpiasr average`, beam-search decoding and --version from
# the command line. Usage: bash import_decode.sh BUILD_DIR SOURCE_DIR
#
# The 60-utterance corpus of train_e2e.sh is laid out as LibriSpeech (FLAC by
# sox, upper-case transcripts) and as a Kaldi data directory with segments;
# `mpiasr import` turns both into NeMo manifests that `tiny` trains (150
# steps) and evaluates on; `mpiasr average` averages two of its checkpoints. `mpiasr lm` makes a 3-gram from the training
# transcripts; eval with --decoder beam --beam 1 writes the same hypotheses as
# greedy decoding, with --lm runs the beam search with the language model,
# and with --lexicon writes only the lexicon's words (those of the training
# transcripts); with --adapt-steps at a learning rate of 1e-30 (test-time
# adaptation that moves no weight) it writes the greedy hypotheses again;
# transcribe takes the same options. Bad input exits with the
# code of its kind and names the culprit.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/train_runs.sh"
train_setup "$1" "$2" import_decode

# exits_with LOG CODE REGEX COMMAND...: COMMAND exits with CODE and says REGEX.
exits_with() {
  local log="$1" code="$2" regex="$3"
  shift 3
  run_fails "$log" "$@"
  ((status == code)) || { cat "$log" >&2; fail "exit code $status, expected $code (log $log)"; }
  expect_line "$log" "$regex" "exit $code"
}

# --version: version, commit, the libraries the build holds and the OpenMP
# wait settings, which the program sets for itself unless the user set one.
run_ok "$work/version.log" env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$mpiasr" --version
cat "$work/version.log"
expect_line "$work/version.log" '^mpiasr [0-9]+\.[0-9]+\.[0-9]+$' "--version"
expect_line "$work/version.log" '^commit: ([0-9a-f]{12}|unknown)$' "--version"
expect_line "$work/version.log" '^CUDA: ' "--version"
expect_line "$work/version.log" '^MPI: .*\(MPI [0-9]\.[0-9]\)$' "--version"
expect_line "$work/version.log" '^BLAS: OpenBLAS .*, core ' "--version"
expect_line "$work/version.log" '^OpenMP: OMP_WAIT_POLICY=passive, GOMP_SPINCOUNT=10000$' "--version"
run_ok "$work/version-active.log" env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=active "$mpiasr" --version
expect_line "$work/version-active.log" '^OpenMP: OMP_WAIT_POLICY=active, GOMP_SPINCOUNT=unset$' \
  "--version with the user's OMP_WAIT_POLICY"
# The CPU kernels' instruction-set level, which MPIASR_SIMD caps; an unknown
# level is a usage error.
expect_line "$work/version.log" '^cpu kernels: (generic|avx2|avx512) \(' "--version"
run_ok "$work/version-generic.log" env MPIASR_SIMD=generic "$mpiasr" --version
expect_line "$work/version-generic.log" '^cpu kernels: generic \(' "--version with MPIASR_SIMD=generic"
exits_with "$work/version-sse.log" 2 'MPIASR_SIMD=sse4 is not a level of the CPU kernels' \
  env MPIASR_SIMD=sse4 "$mpiasr" --version

# LibriSpeech layout: speaker/chapter/speaker-chapter-NNNN.flac + trans.txt.
count=0
while IFS=$'\t' read -r path text; do
  speaker=$((100 + count % 2))
  dir="$work/LibriSpeech/train-clean/$speaker/7"
  mkdir -p "$dir"
  id=$(printf '%d-7-%04d' "$speaker" "$count")
  sox "$corpus/$path" "$dir/$id.flac"
  echo "$id ${text^^}" >>"$dir/$speaker-7.trans.txt"
  count=$((count + 1))
done <"$corpus/train.tsv"
run_ok "$work/import_ls.log" "$mpiasr" import librispeech "$work/LibriSpeech/train-clean" \
  --out "$work/train.jsonl"
cat "$work/import_ls.log"
expect_line "$work/import_ls.log" \
  "^librispeech .*: kept $count of $count entries \([0-9.]+ h of audio\), dropped 0$" "import"
(($(wc -l <"$work/train.jsonl") == count)) || fail "train.jsonl has $(wc -l <"$work/train.jsonl") lines"

# Kaldi layout with segments: each valid utterance from 0.1 s to the end of its file.
mkdir -p "$work/kaldi"
n=0
while IFS=$'\t' read -r path text; do
  echo "rec$n $corpus/$path" >>"$work/kaldi/wav.scp"
  echo "utt$n rec$n 0.1 -1" >>"$work/kaldi/segments"
  echo "utt$n $text" >>"$work/kaldi/text"
  n=$((n + 1))
done <"$corpus/valid.tsv"
run_ok "$work/import_kaldi.log" "$mpiasr" import kaldi "$work/kaldi" --out "$work/valid.jsonl"
expect_line "$work/import_kaldi.log" "kept $n of $n entries" "import kaldi"
grep -q '"offset":0.1' "$work/valid.jsonl" || fail "valid.jsonl lost the segment offsets"

# A wav.scp command drops its utterance, naming its text and wav.scp lines;
# the others are imported (exit 0). With --strict the import fails (exit
# 3) and writes no manifest.
mkdir -p "$work/piped"
cp "$work/kaldi/text" "$work/kaldi/segments" "$work/piped/"
sed '2s/ .*/ flac -c -d x.flac |/' "$work/kaldi/wav.scp" >"$work/piped/wav.scp"
run_ok "$work/piped.log" "$mpiasr" import kaldi "$work/piped" --out "$work/piped.jsonl"
expect_line "$work/piped.log" "kept $((n - 1)) of $n entries" "import kaldi with a command"
expect_line "$work/piped.log" \
  "piped/text:2: recording rec1 \(.*piped/wav.scp:2\) is a command \('flac -c -d x.flac \|'\)" \
  "import kaldi with a command: the line"
(($(wc -l <"$work/piped.jsonl") == n - 1)) || fail "piped.jsonl has $(wc -l <"$work/piped.jsonl") lines"
exits_with "$work/piped_strict.log" 3 "with --strict 1 dropped entries fail the import" \
  "$mpiasr" import kaldi "$work/piped" --out "$work/piped_strict.jsonl" --strict
[[ ! -e "$work/piped_strict.jsonl" ]] || fail "import --strict wrote a manifest"

# Train tiny on the imported manifests.
run_ok "$work/train.log" "$mpiasr" train "$tiny" --data.train_manifest="$work/train.jsonl" \
  --data.valid_manifest="$work/valid.jsonl" --training.threads=1 --output.dir="$work/run" \
  --training.max_steps=150 --training.epochs=1000 --optimizer.lr=3e-3 \
  --validation.every_steps=150 --checkpoint.every_steps=150
checkpoint="$work/run/checkpoints/step-00000150"

# `mpiasr average` of the last two checkpoints (the end of the last epoch
# and step 150): every weight is the mean of the two,
# as a second reader of the safetensors files (Python's struct) computes it,
# and eval takes the output folder. An --out that holds files is refused.
previous=$(find "$work/run/checkpoints" -maxdepth 1 -name 'step-*' | sort | tail -n 2 | head -n 1)
run_ok "$work/average.log" "$mpiasr" average "$previous" "$checkpoint" \
  --out "$work/averaged"
expect_line "$work/average.log" "^averaged 2 checkpoints \(steps \[$((10#${previous##*step-})),150\]\) into .*step-00000150$" \
  "average"
python3 - "$previous" "$checkpoint" "$work/averaged/step-00000150" <<'PY' ||
import json, struct, sys

def tensors(folder):
    data = open(folder + "/model.safetensors", "rb").read()
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + size])
    header.pop("__metadata__")
    return {name: (t["shape"], struct.unpack("<%df" % ((t["data_offsets"][1] - t["data_offsets"][0]) // 4),
                   data[8 + size + t["data_offsets"][0]:8 + size + t["data_offsets"][1]]))
            for name, t in header.items()}

a, b, mean = (tensors(folder) for folder in sys.argv[1:])
assert a.keys() == b.keys() == mean.keys() and len(a) > 10, "tensor names differ"
for name, (shape, values) in mean.items():
    assert shape == a[name][0], name
    want = [struct.unpack("<f", struct.pack("<f", (x + y) / 2))[0] for x, y in zip(a[name][1], b[name][1])]
    assert list(values) == want, "tensor %s is not the mean of the two" % name
assert a["ctc_head.weight"][1] != b["ctc_head.weight"][1], "the two checkpoints are the same"
print("averaged weights: %d tensors, each the mean of the two checkpoints" % len(mean))
PY
  fail "the averaged checkpoint's weights are not the mean of its inputs"
run_ok "$work/eval_averaged.log" "$mpiasr" eval --ckpt "$work/averaged" --manifest "$work/valid.jsonl" \
  --threads 1
expect_line "$work/eval_averaged.log" '^CER [0-9.]+% ' "eval of the averaged checkpoint"
exits_with "$work/average_again.log" 2 "exists and is not an empty folder" \
  "$mpiasr" average "$previous" "$checkpoint" --out "$work/averaged"

# A 3-gram language model from the training transcripts.
cut -f2 "$corpus/train.tsv" >"$work/train.txt"
run_ok "$work/lm.log" "$mpiasr" lm "$work/train.txt" --order 3 --out "$work/lm.arpa"
cat "$work/lm.log"
expect_line "$work/lm.log" "^text: $count sentences, [0-9]+ words" "lm"
expect_line "$work/lm.arpa" '^ngram 3=' "lm.arpa"
printf 'a fine line\nthis line holds </s> in it\n' >"$work/bad.txt"
exits_with "$work/bad_lm.log" 3 "bad.txt:2: the word '</s>' marks sentence ends" \
  "$mpiasr" lm "$work/bad.txt" --no-normalize --out "$work/bad.arpa"

# Beam of 1 without a language model: the greedy hypotheses.
eval_args=(eval --ckpt "$checkpoint" --manifest "$work/valid.jsonl" --threads 1)
run_ok "$work/greedy.log" "$mpiasr" "${eval_args[@]}" --out "$work/greedy.tsv"
run_ok "$work/beam1.log" "$mpiasr" "${eval_args[@]}" --decoder beam --beam 1 --out "$work/beam1.tsv"
expect_line "$work/beam1.log" '^decoder: beam 1, word bonus 0$' "eval --beam 1"
diff "$work/greedy.tsv" "$work/beam1.tsv" || fail "beam 1 differs from greedy decoding"
(($(cut -f3 "$work/greedy.tsv" | grep -c '[a-z]') > 0)) || fail "every hypothesis is empty: train longer"

# Test-time adaptation at a learning rate too small to move a float weight
# (1e-30): every utterance decoded alone, its adapted weights put back, and
# the hypotheses those of the greedy decoding of the batches; at 1e-2 every
# utterance is decoded.
run_ok "$work/adapt_none.log" "$mpiasr" "${eval_args[@]}" --adapt-steps 2 --adapt-lr 1e-30 \
  --out "$work/adapt_none.tsv"
expect_line "$work/adapt_none.log" \
  '^test-time adaptation: 2 Adam steps at learning rate 1e-30 .*, [0-9]+ LayerNorm parameters' \
  "eval --adapt-steps"
diff "$work/greedy.tsv" "$work/adapt_none.tsv" || fail "adaptation at learning rate 1e-30 changed hypotheses"
run_ok "$work/adapt.log" "$mpiasr" "${eval_args[@]}" --adapt-steps 3 --adapt-lr 1e-2 \
  --out "$work/adapt.tsv"
(($(wc -l <"$work/adapt.tsv") == n + 1)) || fail "eval --adapt-steps wrote $(wc -l <"$work/adapt.tsv") lines"
grep -E '^(test-time|CER|WER)' "$work/adapt.log"

# The beam search with the language model.
run_ok "$work/beam_lm.log" "$mpiasr" "${eval_args[@]}" --decoder beam --beam 8 --lm "$work/lm.arpa" \
  --lm-weight 0.8 --word-bonus 1.5 --out "$work/lm.tsv"
expect_line "$work/beam_lm.log" \
  "^decoder: beam 8, language model .*lm.arpa \(3-gram, [0-9]+ words\), weight 0.8, word bonus 1.5$" \
  "eval --lm"
expect_line "$work/beam_lm.log" '^WER [0-9.]+% ' "eval --lm"
(($(wc -l <"$work/lm.tsv") == n + 1)) || fail "eval --lm wrote $(wc -l <"$work/lm.tsv") lines"
grep -E '^(decoder|CER|WER)' "$work/greedy.log" "$work/beam_lm.log"

# The beam search with a lexicon: the training transcripts' words; every
# word of every hypothesis is one of them.
tr ' ' '\n' <"$work/train.txt" | sort -u | sed '/^$/d' >"$work/lexicon.txt"
run_ok "$work/beam_lexicon.log" "$mpiasr" "${eval_args[@]}" --decoder beam --beam 8 \
  --lm "$work/lm.arpa" --lexicon "$work/lexicon.txt" --out "$work/lexicon.tsv"
expect_line "$work/beam_lexicon.log" \
  "^decoder: beam 8, .* lexicon .*lexicon.txt \($(wc -l <"$work/lexicon.txt") words\)$" "eval --lexicon"
outside=$(tail -n +2 "$work/lexicon.tsv" | cut -f3 | tr ' ' '\n' | sed '/^$/d' |
  grep -vxF -f "$work/lexicon.txt" | head -n 3 || true)
[[ -z $outside ]] || fail "eval --lexicon wrote words outside the lexicon: $outside"
(($(tail -n +2 "$work/lexicon.tsv" | cut -f3 | grep -c '[a-z]') > 0)) ||
  fail "eval --lexicon: every hypothesis is empty"
grep -E '^(decoder|CER|WER)' "$work/beam_lexicon.log"

mapfile -t files < <(cut -f1 "$corpus/test.tsv" | sed "s|^|$corpus/|")
"$mpiasr" transcribe --ckpt "$checkpoint" --decoder beam --lm "$work/lm.arpa" "${files[@]}" \
  >"$work/transcripts.tsv" 2>"$work/transcribe.log" || { cat "$work/transcribe.log"; fail "transcribe"; }
(($(wc -l <"$work/transcripts.tsv") == ${#files[@]})) || fail "transcribe printed $(wc -l <"$work/transcripts.tsv") lines"

exits_with "$work/greedy_lm.log" 2 "--lm .* needs --decoder beam" \
  "$mpiasr" "${eval_args[@]}" --lm "$work/lm.arpa"
exits_with "$work/no_lm.log" 3 "nowhere.arpa': cannot open" \
  "$mpiasr" transcribe --ckpt "$checkpoint" --decoder beam --lm "$work/nowhere.arpa" "${files[0]}"
exits_with "$work/greedy_lexicon.log" 2 "--lexicon .* needs --decoder beam" \
  "$mpiasr" "${eval_args[@]}" --lexicon "$work/lexicon.txt"
printf 'one\ntwo words\n' >"$work/bad_lexicon.txt"
exits_with "$work/bad_lexicon.log" 3 "bad_lexicon.txt:2: 'two words' is not one word" \
  "$mpiasr" transcribe --ckpt "$checkpoint" --decoder beam --lexicon "$work/bad_lexicon.txt" \
  "${files[0]}"
echo "import, lm, beam decoding and --version: ok"
