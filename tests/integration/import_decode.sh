#!/usr/bin/env bash
# The corpus importers, `mpiasr lm`, beam-search decoding and --version from
# the command line. Usage: bash import_decode.sh BUILD_DIR SOURCE_DIR
#
# A 24-utterance corpus (scripts/make-corpus.sh, cached in the build folder)
# is laid out as LibriSpeech (FLAC by sox, upper-case transcripts) and as a
# Kaldi data directory with segments; `mpiasr import` turns both into NeMo
# manifests that `tiny` trains (150 steps) and evaluates on. `mpiasr lm` makes a 3-gram
# from the training transcripts; eval with --decoder beam --beam 1 writes the
# same hypotheses as greedy decoding, and with --lm runs the beam search with
# the language model; transcribe takes the same options. Bad input exits with
# the code of its kind and names the culprit.
set -euo pipefail
build_dir="$(cd "$1" && pwd)"
source_dir="$(cd "$2" && pwd)"
mpiasr="$build_dir/mpiasr"
work="$build_dir/import_decode"
corpus="$build_dir/parity_corpus"
rm -rf "$work"
mkdir -p "$work"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Runs "$@", expecting exit code $1 and a line of its output matching $2.
expect_exit() {
  local code=$1 pattern=$2
  shift 2
  local status=0
  "$@" >"$work/out.log" 2>&1 || status=$?
  ((status == code)) || { cat "$work/out.log"; fail "'$*' exited with $status, not $code"; }
  grep -Eq -- "$pattern" "$work/out.log" || { cat "$work/out.log"; fail "'$*' did not say /$pattern/"; }
}

[[ -x "$mpiasr" ]] || fail "$mpiasr not built"
bash "$source_dir/scripts/make-corpus.sh" --out "$corpus" --utterances 24 --seed 11 --format wav \
  --valid-fraction 0.15 --test-fraction 0.1 --jobs 2 >"$work/corpus.log"

# --version: version, commit, and the libraries the build holds.
"$mpiasr" --version >"$work/version.log" || fail "--version exited with $?"
cat "$work/version.log"
for line in '^mpiasr [0-9]+\.[0-9]+\.[0-9]+$' '^commit: [0-9a-f]{12}$|^commit: unknown$' '^CUDA: ' \
  '^MPI: .*\(MPI [0-9]\.[0-9]\)$' '^BLAS: OpenBLAS .*, core '; do
  grep -Eq "$line" "$work/version.log" || fail "--version has no line /$line/"
done

# LibriSpeech layout: speaker/chapter/speaker-chapter-NNNN.flac + trans.txt.
i=0
while IFS=$'\t' read -r path text; do
  speaker=$((100 + i % 2))
  dir="$work/LibriSpeech/train-clean/$speaker/7"
  mkdir -p "$dir"
  id=$(printf '%d-7-%04d' "$speaker" "$i")
  sox "$corpus/$path" "$dir/$id.flac"
  echo "$id ${text^^}" >>"$dir/$speaker-7.trans.txt"
  i=$((i + 1))
done <"$corpus/train.tsv"
"$mpiasr" import librispeech "$work/LibriSpeech/train-clean" --out "$work/train.jsonl" \
  >"$work/import_ls.log" 2>&1 || { cat "$work/import_ls.log"; fail "import librispeech exited with $?"; }
cat "$work/import_ls.log"
grep -Eq "^librispeech .*: kept $i of $i entries \([0-9.]+ h of audio\), dropped 0$" "$work/import_ls.log" ||
  fail "import librispeech: no 'kept $i of $i' line"
(($(wc -l <"$work/train.jsonl") == i)) || fail "train.jsonl has $(wc -l <"$work/train.jsonl") lines"

# Kaldi layout with segments: each valid utterance is 0.1 s .. the end of its file.
mkdir -p "$work/kaldi"
n=0
while IFS=$'\t' read -r path text; do
  echo "rec$n $corpus/$path" >>"$work/kaldi/wav.scp"
  echo "utt$n rec$n 0.1 -1" >>"$work/kaldi/segments"
  echo "utt$n $text" >>"$work/kaldi/text"
  n=$((n + 1))
done <"$corpus/valid.tsv"
"$mpiasr" import kaldi "$work/kaldi" --out "$work/valid.jsonl" >"$work/import_kaldi.log" 2>&1 ||
  { cat "$work/import_kaldi.log"; fail "import kaldi exited with $?"; }
grep -q "kept $n of $n entries" "$work/import_kaldi.log" || fail "import kaldi: not every entry kept"
grep -q '"offset":0.1' "$work/valid.jsonl" || fail "valid.jsonl lost the segment offsets"

# A wav.scp command stops the import, naming file and line.
mkdir -p "$work/piped"
cp "$work/kaldi/text" "$work/piped/text"
{ head -1 "$work/kaldi/wav.scp"; echo "rec1 flac -c -d x.flac |"; } >"$work/piped/wav.scp"
expect_exit 3 "piped/wav.scp:2: 'flac -c -d x.flac \|'" \
  "$mpiasr" import kaldi "$work/piped" --out "$work/piped.jsonl"

# Train tiny on the imported manifests.
"$mpiasr" train "$source_dir/scripts/configs/tiny.yaml" --data.train_manifest="$work/train.jsonl" \
  --data.valid_manifest="$work/valid.jsonl" --training.threads=1 --output.dir="$work/run" \
  --training.max_steps=150 --training.epochs=1000 --optimizer.lr=3e-3 --validation.every_steps=150 \
  --checkpoint.every_steps=150 >"$work/train.log" 2>&1 || { tail -20 "$work/train.log"; fail "train exited with $?"; }
checkpoint="$work/run/checkpoints/step-00000150"

# A 3-gram language model from the training transcripts (normalized as the tokenizer sees them).
cut -f2 "$corpus/train.tsv" >"$work/train.txt"
"$mpiasr" lm "$work/train.txt" --order 3 --out "$work/lm.arpa" >"$work/lm.log" 2>&1 ||
  { cat "$work/lm.log"; fail "lm exited with $?"; }
cat "$work/lm.log"
grep -Eq "^text: $i sentences, [0-9]+ words" "$work/lm.log" || fail "lm: no text summary"
grep -q '^ngram 3=' "$work/lm.arpa" || fail "lm.arpa has no trigram count"
printf 'a fine line\nthis line holds </s> in it\n' >"$work/bad.txt"
expect_exit 3 "bad.txt:2: the word '</s>' marks sentence ends" \
  "$mpiasr" lm "$work/bad.txt" --no-normalize --out "$work/bad.arpa"

# Beam of 1 without a language model: the greedy hypotheses.
"$mpiasr" eval --ckpt "$checkpoint" --manifest "$work/valid.jsonl" --threads 1 \
  --out "$work/greedy.tsv" >"$work/greedy.log" 2>&1 || { cat "$work/greedy.log"; fail "eval greedy"; }
"$mpiasr" eval --ckpt "$checkpoint" --manifest "$work/valid.jsonl" --threads 1 --decoder beam \
  --beam 1 --out "$work/beam1.tsv" >"$work/beam1.log" 2>&1 || { cat "$work/beam1.log"; fail "eval beam 1"; }
grep -q '^decoder: beam 1, word bonus 0$' "$work/beam1.log" || fail "eval beam 1: no decoder line"
diff "$work/greedy.tsv" "$work/beam1.tsv" || fail "beam 1 differs from greedy decoding"
(($(cut -f3 "$work/greedy.tsv" | grep -c '[a-z]') > 0)) || fail "every hypothesis is empty: train longer"

# The beam search with the language model.
"$mpiasr" eval --ckpt "$checkpoint" --manifest "$work/valid.jsonl" --threads 1 --decoder beam \
  --beam 8 --lm "$work/lm.arpa" --lm-weight 0.8 --word-bonus 1.5 --out "$work/lm.tsv" \
  >"$work/beam_lm.log" 2>&1 || { cat "$work/beam_lm.log"; fail "eval beam + lm"; }
grep -Eq "^decoder: beam 8, language model .*lm.arpa \(3-gram, [0-9]+ words\), weight 0.8, word bonus 1.5$" \
  "$work/beam_lm.log" || { cat "$work/beam_lm.log"; fail "eval beam + lm: no decoder line"; }
grep -Eq '^WER [0-9.]+% ' "$work/beam_lm.log" || fail "eval beam + lm: no WER"
(($(wc -l <"$work/lm.tsv") == n + 1)) || fail "eval beam + lm: $(wc -l <"$work/lm.tsv") lines"
grep -E '^(decoder|CER|WER)' "$work/greedy.log" "$work/beam_lm.log"

mapfile -t files < <(cut -f1 "$corpus/test.tsv" | sed "s|^|$corpus/|")
"$mpiasr" transcribe --ckpt "$checkpoint" --decoder beam --lm "$work/lm.arpa" "${files[@]}" \
  >"$work/transcripts.tsv" 2>"$work/transcribe.log" || { cat "$work/transcribe.log"; fail "transcribe"; }
(($(wc -l <"$work/transcripts.tsv") == ${#files[@]})) || fail "transcribe printed $(wc -l <"$work/transcripts.tsv") lines"

expect_exit 2 "--lm .* needs --decoder beam" \
  "$mpiasr" eval --ckpt "$checkpoint" --manifest "$work/valid.jsonl" --lm "$work/lm.arpa"
expect_exit 3 "nowhere.arpa': cannot open" \
  "$mpiasr" transcribe --ckpt "$checkpoint" --decoder beam --lm "$work/nowhere.arpa" "${files[0]}"
echo "import, lm, beam decoding and --version: ok"
