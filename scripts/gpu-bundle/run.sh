#!/usr/bin/env bash
# mpiasr's GPU check, run from the folder scripts/gpu-bundle.sh packs, on a
# machine with an NVIDIA GPU and nothing of ours installed (no compiler, no
# packages, no network):
#
#   bash gpu-bundle/run.sh OUTDIR
#
# It unpacks payload.tar.xz into $TMPDIR (with xz, else python3's tarfile),
# sources its env.sh (OpenMPI relocated into it; the driver, the CUDA
# libraries and NCCL found on this machine and printed), then runs these
# steps in order, each under `timeout` with its own budget in seconds (the
# sizes below):
#   probe         10  nvidia-smi: the GPUs and the driver
#   allocator     10  offset_allocator_test: the device arena's bookkeeping (CPU only)
#   kernels       20  cuda_kernels_test: each CUDA op against the CPU backend,
#                     one row per op with its worst error as a share of its tolerance
#   train_step    15  cuda_training_test: a `tiny` training step, GPU against CPU
#   train         30  mpiasr train tiny on the GPU, 300 steps on the bundled
#                     corpus: the loss falls, checkpoints are written
#   resume        15  the same command to step 350: it resumes from step 300,
#                     now with step graphs (training.cuda_graphs, frames padded
#                     to 64), and replays them
#   eval          10  mpiasr eval of the GPU run's checkpoint: a CER
#   nccl_mpirun   20  nccl_test under the bundle's mpirun -np 1 (1-rank NCCL
#                     all-reduce on the world and node communicators, the bucketed reducer)
#   nccl_single   15  nccl_test started alone, as an MPI singleton
#   bench_ops     20  cuda_ops_bench: time per op, TFLOP/s or GB/s, % of peak
#   bench_medium  30  cuda_train_bench --preset=medium: ms/step, audio-s/s, TFLOP/s, MFU,
#                     eager and with step graphs, 6 s each
#   bench_large   35  the same for large
#   pytorch      130  the same models and batches in PyTorch (pytorch/bench_gpu_step.py:
#                     bf16 autocast, scaled_dot_product_attention, AdamW, CTC), eager
#                     and with torch.compile: ms/step and mpiasr's step time over
#                     it, up to PYTORCH_SECONDS for each model
#   profile       60  Nsight Compute over one eager step of large (cuda_train_bench
#                     --profile-step): kernel time, share and DRAM rate by kernel
#   memcheck      30  compute-sanitizer memcheck over the subset of
#                     cuda_kernels_test in MEMCHECK_FILTER
# The budgets add up to 450 s, and no step starts after 460 s (MPIASR_CHECK_SECONDS),
# so a run ends within 8 minutes however its steps end. Every CUDA program
# runs with cuBLASLt's error log on (CUBLASLT_LOG_LEVEL=1), written next to
# the step's log (STEP.cublaslt.PID.log) and copied into it.
#
# Table columns: step, status, seconds taken, budget, details. Status: PASS,
# FAIL (the project's fault, or a GPU that nvidia-smi lists and the CUDA
# runtime does not use), SKIP (the step could not run here: no GPU, a tool
# that is missing or refuses the device, no PyTorch or none of its CUDA, a
# program the bundle does not hold), TIMEOUT (killed at its budget), NOT RUN
# (out of time, or a step it needs did not pass). Indented rows break a step
# down (one per op, benchmark, test, PyTorch's mode, kernel).
# Peaks for the percentages: MPIASR_PEAK_TFLOPS (default 989: dense fp16 of
# the H200 and H100 SXM datasheets) and MPIASR_PEAK_GBPS (default 4800: the
# H200's HBM3e).
#
# OUTDIR gets three files, rewritten after every step, so a run killed midway
# still leaves them: summary.txt (the table), summary.tsv (its rows,
# tab-separated) and logs.tar.gz (every step's output, the benchmarks' JSON,
# the training metrics, the libraries used). The table is printed at the end.
# Exit status 0 when no step failed, timed out or was left out; 1 otherwise;
# 2 on bad usage.
#
# MPIASR_CHECK_SIZES=rehearsal runs the same steps, checks and thresholds at
# the sizes of the rehearsal on the SIMT emulator (tests/integration/gpu_rehearsal.sh):
# the sizes block below is all that differs (PyTorch runs on the CPU there).
set -uo pipefail
bundle_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ $# -ne 1 ]]; then
  echo "usage: bash run.sh OUTDIR" >&2
  exit 2
fi
mkdir -p "$1" && out="$(cd "$1" && pwd)" || exit 2

# ---- sizes: all that differs between the GPU run and its rehearsal -------------------------
# The rehearsal runs the CUDA code on the SIMT emulator (a `tiny` step takes
# seconds there), so it trains fewer steps on batches of one utterance,
# benchmarks smaller shapes and models, and has the emulator's budgets; its
# speed figures are marked as emulated. LOSS_FALL is the share of the first logged training loss that the
# last must be under: `tiny` sits on the blank plateau at about 0.76 of its
# first loss until some 100 steps, so the rehearsal's 8 steps are held to a
# fall of a twentieth (on the CPU, 3.86 to 3.12 from steps 1-2 to 7-8).
case "${MPIASR_CHECK_SIZES:-gpu}" in
  gpu) sizes_column=1 ;;
  rehearsal) sizes_column=2 ;;
  *)
    echo "run.sh: MPIASR_CHECK_SIZES is gpu or rehearsal, not '$MPIASR_CHECK_SIZES'" >&2
    exit 2
    ;;
esac
# The GPU run's value or the rehearsal's.
size() { if ((sizes_column == 1)); then echo "$1"; else echo "$2"; fi; }
#                       GPU run                          rehearsal
check_seconds=$(size    460                              560)
TRAIN_STEPS=$(size      300                              8)
RESUME_STEPS=$(size     350                              16)
LOG_EVERY=$(size        25                               2)
LOSS_FALL=$(size        0.75                             0.95)
TRAIN_ARGS=$(size       ""                               "--batching.batch_size=1")
OPS_BENCH_ARGS=$(size   "--benchmark_min_time=0.1" \
  "--batch=1 --frames=400 --parameters=1000000 --benchmark_min_time=0.001")
# The model and batch of bench_medium and bench_large (on the GPU,
# cuda_train_bench's default batch: 32 utterances of 1500 frames), which
# pytorch and profile take too.
MEDIUM_STEP=$(size      "--preset=medium"                "--preset=tiny --batch=1 --frames=200")
LARGE_STEP=$(size       "--preset=large"                 "--preset=tiny --batch=2 --frames=200")
MEDIUM_BENCH_ARGS="$MEDIUM_STEP $(size "--seconds=6" "--seconds=0.1")"
LARGE_BENCH_ARGS="$LARGE_STEP $(size "--seconds=6" "--seconds=0.1")"
PYTORCH_ARGS=$(size     "--device=cuda"                  "--device=cpu --precision=fp32 --steps=3 --warmup=1")
PYTORCH_SECONDS=$(size  58                               30)
FIGURES_NOTE=$(size     ""                               "emulated: not a GPU figure; ")
PYTORCH_NOTE=$(size     ""                               "PyTorch on the CPU, mpiasr emulated: not GPU figures; ")
declare -A budgets  # seconds
while read -r step gpu_run rehearsal; do budgets[$step]=$(size "$gpu_run" "$rehearsal"); done << 'EOF'
probe         10   10
allocator     10   20
kernels       20  120
train_step    15   60
train         30  120
resume        15   90
eval          10   30
nccl_mpirun   20   60
nccl_single   15   60
bench_ops     20   60
bench_medium  30   60
bench_large   35   90
pytorch      130   60
profile       60   10
memcheck      30   90
EOF
# The subset of cuda_kernels_test that compute-sanitizer runs in its budget:
# the fp16 instantiation of every test, each kernel once (docs/gpu.md,
# "Checking a GPU machine", says how it was sized).
MEMCHECK_FILTER='*/0.*'
export TRAIN_STEPS RESUME_STEPS LOG_EVERY LOSS_FALL TRAIN_ARGS OPS_BENCH_ARGS MEDIUM_STEP LARGE_STEP \
  MEDIUM_BENCH_ARGS LARGE_BENCH_ARGS PYTORCH_ARGS PYTORCH_SECONDS FIGURES_NOTE PYTORCH_NOTE \
  MEMCHECK_FILTER

start=$(date +%s)
deadline=$((start + ${MPIASR_CHECK_SECONDS:-$check_seconds}))
work="$(mktemp -d "${TMPDIR:-/tmp}/mpiasr-gpu-check.XXXXXX")" || exit 1
trap 'rm -rf "$work"' EXIT
logs="$work/logs"
B="$work/bundle"
mkdir -p "$logs" "$B"
rows="$logs/rows.tsv"
: > "$rows"
PEAK_TFLOPS="${MPIASR_PEAK_TFLOPS:-989}"
PEAK_GBPS="${MPIASR_PEAK_GBPS:-4800}"
gpus=0
device="no GPU found"
export B work logs PEAK_TFLOPS PEAK_GBPS gpus
declare -A status=()

note() { echo "run.sh [$(($(date +%s) - start)) s]: $*"; }

# ---- the table ----------------------------------------------------------------------------

add_row() {  # step status seconds budget details
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5//$'\t'/ }" >> "$rows"
}

# Rewrites OUTDIR's three files from the rows and logs so far.
publish() {
  {
    echo "mpiasr GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n), $(($(date +%s) - start)) s"
    echo "device: $device"
    [[ -f "$bundle_dir/bundle-info.txt" ]] && sed -n '1,2p' "$bundle_dir/bundle-info.txt"
    echo "peaks: $PEAK_TFLOPS TFLOP/s dense fp16, $PEAK_GBPS GB/s"
    awk -F'\t' '
      { step[NR] = $1; st[NR] = $2; s[NR] = $3; budget[NR] = $4; details[NR] = $5
        if (length($1) > width) width = length($1) }
      END {
        format = "%-" width "s  %-7s %4s %6s  %s\n"
        printf format, "step", "status", "s", "budget", "details"
        for (i = 1; i <= NR; i++) printf format, step[i], st[i], s[i], budget[i], details[i]
      }' "$rows"
  } > "$out/summary.txt.tmp" && mv "$out/summary.txt.tmp" "$out/summary.txt"
  { printf 'step\tstatus\tseconds\tbudget_s\tdetails\n'; cat "$rows"; } > "$out/summary.tsv.tmp" &&
    mv "$out/summary.tsv.tmp" "$out/summary.tsv"
  if tar -czf "$out/logs.tar.gz.tmp" -C "$work" logs; then
    mv "$out/logs.tar.gz.tmp" "$out/logs.tar.gz"
  else
    rm -f "$out/logs.tar.gz.tmp"
  fi
}

# ---- what the steps share (exported: steps run in `timeout bash -c`) ------------------------

detail() { echo "$*" > "$logs/$STEP.details"; }

# A GoogleTest log's verdict: 0 all passed, 77 some skipped (the reason is the
# details), 1 failures or a non-zero exit code `rc`.
gtest_verdict() {  # log rc
  local log=$1 rc=$2 passed failed skipped reason
  passed=$(grep -cE '^\[       OK \] [^ ]+ \([0-9]+ ms\)$' "$log")
  failed=$(grep -E '^\[  FAILED  \] [^ ]+ \([0-9]+ ms\)$' "$log" | awk '{ print $4 }' | tr '\n' ' ')
  skipped=$(grep -cE '^\[  SKIPPED \] [^ ]+ \([0-9]+ ms\)$' "$log")
  if ((rc != 0)) || [[ -n "$failed" ]]; then
    detail "exit $rc; $passed passed${failed:+; failed: $failed}; last line: $(tail -n 1 "$log")"
    return 1
  fi
  if ((skipped > 0)); then
    reason=$(grep -A1 ': Skipped$' "$log" | grep -v ': Skipped$' | grep -v '^--$' | head -n 1)
    detail "$passed passed, $skipped skipped: $reason"
    return 77
  fi
  detail "$passed passed"
  return 0
}

# Rows of a GoogleTest log, one per test (status, ms, and its largest
# "[ worst    ] what: measure, P% of tolerance" line), or with `all`, one per such line.
gtest_rows() {  # log [all]
  awk -v all="${2:-}" '
    function flush(name, st, ms) {
      printf "  %s\t%s\t%.2f\t\t%s\n", name, st, ms / 1000, (worst == "" ? "exact comparisons" : worst)
    }
    /^\[ RUN      \] / { test = $4; worst = ""; best = -1 }
    /^\[ worst    \] / {
      line = substr($0, 14)
      if (all != "") { printf "  %s\t\t\t\t%s\n", test, line; next }
      pct = line; sub(/% of tolerance.*/, "", pct); sub(/.* /, "", pct)
      if (pct + 0 > best) { best = pct + 0; worst = line }
    }
    /^\[       OK \] [^ ]+ \([0-9]+ ms\)$/ && all == "" { ms = $5; sub(/\(/, "", ms); flush($4, "PASS", ms) }
    /^\[  FAILED  \] [^ ]+ \([0-9]+ ms\)$/ && all == "" { ms = $5; sub(/\(/, "", ms); flush($4, "FAIL", ms) }
    /^\[  SKIPPED \] [^ ]+ \([0-9]+ ms\)$/ && all == "" { ms = $5; sub(/\(/, "", ms); flush($4, "SKIP", ms) }
  ' "$1"
}

# Runs a GoogleTest program of the bundle and returns its verdict.
gtest_step() {  # program [args...]
  bundle_run "$@" --gtest_color=no 2>&1
  gtest_verdict "$logs/$STEP.log" "$?"
}

# A benchmark program: 77 when it printed its SKIP line (no device).
bench_step() {  # program [args...]
  bundle_run "$@" 2>&1
  local rc=$?
  if grep -q ': SKIP (' "$logs/$STEP.log"; then
    detail "$(grep -m1 ': SKIP (' "$logs/$STEP.log")"
    return 77
  fi
  if ((rc == 0)); then
    detail "${FIGURES_NOTE}$(grep -c '"run_type": "iteration"' "$logs/$STEP.json") benchmarks"
  else
    detail "exit $rc: $(tail -n 1 "$logs/$STEP.log")"
  fi
  return "$rc"
}

# 77 with the reason when mpiasr stopped because no CUDA device is usable.
no_device() {  # log
  local line
  line=$(grep -m1 'no CUDA device' "$1") || return 1
  detail "${line#*error: }"
  return 0
}

# mpiasr train tiny on the GPU on the bundled corpus, into $work/train.
# shellcheck disable=SC2086  # the sizes' arguments split into words
mpiasr_train() {  # [--section.key=value ...]
  bundle_run "$B/bin/mpiasr" train "$B/configs/tiny.yaml" $TRAIN_ARGS \
    --data.train_manifest="$B/corpus/train.tsv" --data.valid_manifest="$B/corpus/valid.tsv" \
    --data.test_manifest="$B/corpus/test.tsv" \
    --tokenizer.model_path="$B/prepared/tokens.txt" --features.cmvn_path="$B/prepared/cmvn.json" \
    --training.device=cuda --training.threads=0 --training.epochs=1000 --training.log_every="$LOG_EVERY" \
    --output.dir="$work/train" "$@" 2>&1
}

# ---- the steps ----------------------------------------------------------------------------

step_probe() {
  local smi rc
  smi=$(command -v nvidia-smi || ls /usr/local/nvidia/bin/nvidia-smi 2> /dev/null) ||
    { detail "no nvidia-smi on PATH or in /usr/local/nvidia/bin"; return 77; }
  "$smi" --query-gpu=index,name,memory.total,driver_version,compute_cap --format=csv,noheader \
    > "$logs/gpus.csv" 2>&1
  rc=$?
  cat "$logs/gpus.csv"
  if ((rc != 0)); then
    detail "nvidia-smi refused (exit $rc): $(head -n 1 "$logs/gpus.csv")"
    : > "$logs/gpus.csv"
    return 77
  fi
  "$smi" -q > "$logs/nvidia-smi-q.txt" 2>&1
  local count
  count=$(grep -c . "$logs/gpus.csv")
  ((count > 0)) || { detail "nvidia-smi lists no GPU"; return 77; }
  detail "$count GPU(s): $(head -n 1 "$logs/gpus.csv")"
}

step_allocator() { gtest_step "$B/bin/offset_allocator_test"; }
step_kernels() { gtest_step "$B/bin/cuda_kernels_test"; }
step_train_step() { gtest_step "$B/bin/cuda_training_test"; }

step_train() {
  local steps=$TRAIN_STEPS
  mpiasr_train --training.max_steps="$steps" --validation.every_steps=$((steps / 2)) \
    --checkpoint.every_steps=$((steps / 2))
  local rc=$? log="$logs/train.log"
  cp "$work/train/metrics.jsonl" "$logs/" 2> /dev/null
  if ((rc != 0)); then
    no_device "$log" && return 77
    detail "exit $rc: $(tail -n 1 "$log")"
    return 1
  fi
  grep -qE '^backend: cuda-(bf16|fp16) ' "$log" || { detail "did not train on the CUDA backend"; return 1; }
  grep -q "^training done: $steps steps" "$log" || { detail "no 'training done: $steps steps' line"; return 1; }
  local losses
  losses=$(grep '"kind":"train"' "$work/train/metrics.jsonl" | sed 's/.*"loss":\([^,}]*\).*/\1/' |
    awk 'NR == 1 { first = $1 } { last = $1 } END { printf "%.3f %.3f", first, last }')
  local first=${losses% *} last=${losses#* } seconds cer
  seconds=$(sed -n "s/^training done: $steps steps in \([^ ;]*\).*/\1/p" "$log")
  cer=$(grep "^valid step $steps:" "$log" | sed 's/.*CER \([0-9.]*%\).*/\1/')
  detail "$(sed -n 's/^backend: \(cuda-[a-z0-9]*\) .*/\1/p' "$log"): loss $first -> $last in $steps steps ($seconds), valid CER $cer"
  ls -d "$work"/train/checkpoints/step-*"$steps" > /dev/null 2>&1 ||
    { detail "no checkpoint of step $steps in $work/train/checkpoints"; return 1; }
  awk -v f="$first" -v l="$last" -v share="$LOSS_FALL" 'BEGIN { exit !(l < share * f) }' ||
    { detail "the loss did not fall below $LOSS_FALL of its first value: $first -> $last"; return 1; }
}

step_resume() {
  mpiasr_train --training.max_steps="$RESUME_STEPS" --validation.every_steps=0 --checkpoint.every_steps=0 \
    --training.cuda_graphs=true --batching.frame_multiple=64
  local rc=$? log="$logs/resume.log"
  cp "$work/train/metrics.jsonl" "$logs/" 2> /dev/null
  ((rc == 0)) || { detail "exit $rc: $(tail -n 1 "$log")"; return 1; }
  grep -q "^resumed from .*: step $TRAIN_STEPS," "$log" || { detail "did not resume from step $TRAIN_STEPS"; return 1; }
  grep -q "^training done: $RESUME_STEPS steps" "$log" ||
    { detail "the resumed run did not reach step $RESUME_STEPS"; return 1; }
  grep -qE '^step graphs: [1-9][0-9]* captured, [1-9][0-9]* replayed' "$log" ||
    { detail "no graph replayed: $(grep -m1 '^step graphs' "$log")"; return 1; }
  detail "$(grep -m1 '^resumed from' "$log"); $(grep -m1 '^training done' "$log"); $(grep -m1 '^step graphs' "$log")"
}

step_eval() {
  bundle_run "$B/bin/mpiasr" eval --ckpt "$work/train" --manifest "$B/corpus/test.tsv" \
    --out "$work/test-hypotheses.tsv" 2>&1
  local rc=$? log="$logs/eval.log"
  ((rc == 0)) || { detail "exit $rc: $(tail -n 1 "$log")"; return 1; }
  grep -qE '^CER [0-9]+\.[0-9]+%' "$log" || { detail "no CER line"; return 1; }
  detail "$(grep -m1 -E '^CER ' "$log")"
}

# One rank: the test that needs two or more (the bootstrap's wait for every
# rank) is left out, so that a pass is a PASS.
export one_rank_nccl_tests=--gtest_filter=-NcclBootstrap.InitWaitsForEveryRankBlockingOrNot
step_nccl_mpirun() { gtest_step "$B/bin/mpirun" -np 1 "$B/bin/nccl_test" "$one_rank_nccl_tests"; }
step_nccl_single() { gtest_step "$B/bin/nccl_test" "$one_rank_nccl_tests"; }

# shellcheck disable=SC2086  # the sizes' arguments split into words
step_bench_ops() {
  bench_step "$B/bin/cuda_ops_bench" $OPS_BENCH_ARGS \
    --benchmark_out="$logs/bench_ops.json" --benchmark_out_format=json
}
# shellcheck disable=SC2086
step_bench_medium() {
  bench_step "$B/bin/cuda_train_bench" $MEDIUM_BENCH_ARGS \
    --benchmark_out="$logs/bench_medium.json" --benchmark_out_format=json
}
# shellcheck disable=SC2086
step_bench_large() {
  bench_step "$B/bin/cuda_train_bench" $LARGE_BENCH_ARGS \
    --benchmark_out="$logs/bench_large.json" --benchmark_out_format=json
}

# A figure of the first benchmark in a Google Benchmark JSON file whose name
# starts with `name` (real_time is in the benchmark's time_unit: ms for
# cuda_train_bench); nothing when the file or the figure is not there.
bench_value() {  # json name field
  awk -v want="$2" -v field="\"$3\":" '
    /^ *"name":/ { name = $0; sub(/^ *"name": *"/, "", name); found = index(name, want) == 1 }
    found && index($0, field) {
      value = $0; sub(/^[^:]*: */, "", value); sub(/,$/, "", value); print value + 0; exit
    }' "$1" 2> /dev/null
}

# PyTorch's step beside mpiasr's: pytorch/bench_gpu_step.py on bench_medium's
# and bench_large's models and batches, each run up to PYTORCH_SECONDS, by
# the first python3 that imports torch (the one on PATH, else the usual
# virtual environment's). No python3, no PyTorch or none of its CUDA is a
# SKIP naming it; a PyTorch model whose parameters are not mpiasr's, or an
# eager step that does not run, a FAIL. torch.compile is optional: when it
# fails, or its run is killed at PYTORCH_SECONDS, its row says so and the
# step goes on. Rows: each mode's ms/step and mpiasr's eager train_step time
# over it (from bench_medium's and bench_large's JSON, when they ran).
# shellcheck disable=SC2086  # the sizes' arguments split into words
step_pytorch() {
  local python="" candidate
  for candidate in python3 /opt/torch/.venv/bin/python3; do
    if "$candidate" -c 'import importlib.util as u, sys; sys.exit(not u.find_spec("torch"))' 2> /dev/null; then
      python=$candidate
      break
    fi
  done
  if [[ -z "$python" ]]; then
    command -v python3 > /dev/null ||
      { detail "no python3 on PATH (nor /opt/torch/.venv/bin/python3)"; return 77; }
    detail "no PyTorch in $(command -v python3) (no module torch), nor in /opt/torch/.venv"
    return 77
  fi
  local model steps log rc eager compile line params mpiasr_ms mpiasr_params summary=""
  : > "$logs/pytorch.rows"
  for model in medium large; do
    steps=MEDIUM_STEP
    [[ $model == large ]] && steps=LARGE_STEP
    log="$logs/pytorch_$model.log"
    timeout -k 5 "$PYTORCH_SECONDS" "$python" "$B/pytorch/bench_gpu_step.py" ${!steps} $PYTORCH_ARGS \
      > "$log" 2>&1
    rc=$?
    cat "$log"
    if ((rc == 77)); then
      detail "$(grep -m1 '^SKIP' "$log")"
      return 77
    fi
    eager=$(sed -n 's/^eager: \([0-9.]*\) ms\/step.*/\1/p' "$log")
    [[ -n "$eager" ]] || { detail "$model: exit $rc, no eager step: $(tail -n 1 "$log")"; return 1; }
    params=$(sed -n 's/^[a-z]*: \([0-9]*\) parameters, .*/\1/p' "$log")
    mpiasr_ms=$(bench_value "$logs/bench_$model.json" train_step/ real_time)
    mpiasr_params=$(bench_value "$logs/bench_$model.json" train_step/ parameters)
    if [[ -n "$mpiasr_params" && "$mpiasr_params" != "$params" ]]; then
      detail "$model: PyTorch's model has $params parameters, mpiasr's $mpiasr_params: not the same model"
      return 1
    fi
    pytorch_row "$model/eager" "$eager" "$(sed -n 's/^eager: [0-9.]* ms\/step (\(.*\))$/\1/p' "$log")"
    compile=$(sed -n 's/^compile: \([0-9.]*\) ms\/step.*/\1/p' "$log")
    line=$(sed -n 's/^compile: SKIP (\(.*\))$/\1/p' "$log")
    if [[ -n "$compile" ]]; then
      pytorch_row "$model/compile" "$compile" "$(sed -n 's/^compile: [0-9.]* ms\/step (\(.*\))$/\1/p' "$log")"
      compile="$compile ms"
    elif [[ -n "$line" ]]; then
      printf '  %s/compile\tSKIP\t\t\t%s\n' "$model" "$line" >> "$logs/pytorch.rows"
      compile=SKIP
    elif ((rc == 124 || rc == 137)); then
      printf '  %s/compile\tTIMEOUT\t\t\tkilled at %s s (PYTORCH_SECONDS) while compiling or timing\n' \
        "$model" "$PYTORCH_SECONDS" >> "$logs/pytorch.rows"
      compile=TIMEOUT
    else
      printf '  %s/compile\tSKIP\t\t\texit %s while compiling: %s\n' "$model" "$rc" "$(tail -n 1 "$log")" \
        >> "$logs/pytorch.rows"
      compile=SKIP
    fi
    summary+="${summary:+; }$model: eager $eager ms, compile $compile"
    [[ -z "$mpiasr_ms" ]] || summary+=$(awk -v m="$mpiasr_ms" 'BEGIN { printf ", mpiasr %.1f ms", m }')
  done
  detail "$PYTORCH_NOTE$(grep -m1 '^torch ' "$logs/pytorch_medium.log"); $summary"
}

# A row of step_pytorch: PyTorch's ms/step, mpiasr's over it (uses the
# caller's model and mpiasr_ms), how it was timed.
pytorch_row() {  # name ms how
  local versus="no mpiasr figure (bench_$model did not run)"
  if [[ -n "$mpiasr_ms" ]]; then
    versus=$(awk -v ms="$2" -v m="$mpiasr_ms" 'BEGIN { printf "mpiasr %.1f ms, %.2f times it", m, m / ms }')
  fi
  printf '  %s\t\t\t\t%s%s ms/step; %s; %s\n' "$1" "$PYTORCH_NOTE" "$2" "$versus" "$3" >> "$logs/pytorch.rows"
}

# Nsight Compute over one eager training step of large (cuda_train_bench
# --profile-step: ncu profiles from its cudaProfilerStart to its
# cudaProfilerStop), each launch's time and DRAM bytes, summed by kernel
# (ncu-kernels.sh) into profile.tsv. No ncu, or an ncu that refuses (exits
# non-zero with an ==ERROR== line: no access to the counters, a device it
# does not know), is a SKIP naming it.
# shellcheck disable=SC2086
step_profile() {
  local ncu
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -n 1)
  [[ -n "$ncu" ]] ||
    { detail "no ncu (Nsight Compute) on PATH, in /usr/local/cuda/bin or /opt/nvidia/nsight-compute"; return 77; }
  ((gpus > 0)) || { detail "no GPU: Nsight Compute needs one"; return 77; }
  # The bundle's libraries for the program only, not for ncu itself.
  "$ncu" --profile-from-start off --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum,dram__bytes.sum --csv --page raw --print-units base \
    --print-kernel-base demangled \
    env LD_LIBRARY_PATH="$MPIASR_LD_LIBRARY_PATH" "$B/bin/cuda_train_bench" $LARGE_STEP --profile-step 2>&1
  local rc=$? log="$logs/profile.log" counted passes all
  if grep -q ': SKIP (' "$log"; then
    detail "$(grep -m1 ': SKIP (' "$log")"
    return 77
  fi
  if ((rc != 0)) && grep -q '^==ERROR==' "$log"; then
    detail "ncu refused (exit $rc): $(grep -m1 '^==ERROR==' "$log")"
    return 77
  fi
  counted=$(sed -n 's/^profiled step: //p' "$log")
  [[ -n "$counted" ]] || { detail "exit $rc, no 'profiled step' line: $(tail -n 1 "$log")"; return 1; }
  ((rc == 0)) || { detail "exit $rc: $(tail -n 1 "$log")"; return 1; }
  bash "$B/ncu-kernels.sh" "$log" > "$logs/profile.tsv" 2> "$logs/profile.err" ||
    { detail "$(cat "$logs/profile.err")"; return 1; }
  passes=$(grep -oE -- '- [0-9]+ pass(es)?' "$log" | awk '$2 > most { most = $2 } END { print most + 0 }')
  all=$(awk -F'\t' 'NR == 1 { printf "%d kernel launches, %.1f ms of kernel time, %.0f GB/s", $2, $3, $5 }' \
    "$logs/profile.tsv")
  detail "${FIGURES_NOTE}$counted; ncu: $all, up to $passes pass(es) a kernel"
}

# compute-sanitizer over MEMCHECK_FILTER's tests. A sanitizer that is missing,
# or refuses the device (it ran no test: the program never started or it
# stopped it), is a SKIP with its message; an error it finds is a FAIL.
step_memcheck() {
  local sanitizer
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer \
    /usr/local/cuda/compute-sanitizer/compute-sanitizer 2> /dev/null | head -n 1)
  [[ -n "$sanitizer" ]] ||
    { detail "no compute-sanitizer on PATH or in /usr/local/cuda"; return 77; }
  ((gpus > 0)) || { detail "no GPU: memcheck needs one"; return 77; }
  bundle_run "$sanitizer" --tool memcheck --error-exitcode 99 --print-limit 20 \
    "$B/bin/cuda_kernels_test" --gtest_color=no --gtest_filter="$MEMCHECK_FILTER" 2>&1
  local rc=$? log="$logs/memcheck.log" errors
  errors=$(grep -m1 'ERROR SUMMARY' "$log")
  if ! grep -q '^\[==========\] Running' "$log" && ((rc != 99)); then
    detail "compute-sanitizer refused (exit $rc): $(grep -m1 -v '^ *$' "$log")"
    return 77
  fi
  gtest_verdict "$log" "$rc"
  local verdict=$?
  detail "${errors#========= }; $(cat "$logs/memcheck.details")"
  return "$verdict"
}

# ---- what the parent reads back after a step -----------------------------------------------

# Rows of a Google Benchmark JSON file: time, rate and share of the peak.
bench_rows() {  # json
  awk -v tflops="$PEAK_TFLOPS" -v gbps="$PEAK_GBPS" -v note="$FIGURES_NOTE" '
    function value(line) { sub(/^[^:]*: */, "", line); sub(/,$/, "", line); gsub(/"/, "", line); return line }
    /^ *"name":/ {
      name = value($0); sub(/\/(manual|real)_time$/, "", name); sub(/\/iterations:[0-9]+$/, "", name)
      tf = gb = audio = skipped = label = time = unit = ""
    }
    /"real_time":/ { time = value($0) }
    /"time_unit":/ { unit = value($0) }
    /"TFLOP\/s":/ { tf = value($0) }
    /"GB\/s":/ { gb = value($0) }
    /"audio_s\/s":/ { audio = value($0) }
    /"skipped_steps":/ { skipped = value($0) }
    /"label":/ { label = value($0) }
    /^ *}/ && name != "" {
      d = sprintf("%.1f %s", time, unit)
      if (audio != "") d = d sprintf("/step, %.0f audio-s/s", audio)
      if (tf != "") d = d sprintf(", %.1f TFLOP/s = %.1f%% of %g", tf, 100 * tf / tflops, tflops)
      if (gb != "") d = d sprintf(", %.0f GB/s = %.1f%% of %g", gb, 100 * gb / gbps, gbps)
      if (audio != "") d = d sprintf(" (MFU), %d steps skipped by the loss scaler; %s", skipped, label)
      printf "  %s\t\t\t\t%s%s\n", name, note, d
      name = ""
    }' "$1"
}

post_kernels() { gtest_rows "$logs/kernels.log"; }
post_train_step() { gtest_rows "$logs/train_step.log" all; }
post_nccl_mpirun() { gtest_rows "$logs/nccl_mpirun.log"; }
post_bench_ops() { [[ -f "$logs/bench_ops.json" ]] && bench_rows "$logs/bench_ops.json"; }
post_bench_medium() { [[ -f "$logs/bench_medium.json" ]] && bench_rows "$logs/bench_medium.json"; }
post_bench_large() { [[ -f "$logs/bench_large.json" ]] && bench_rows "$logs/bench_large.json"; }
post_pytorch() { cat "$logs/pytorch.rows" 2> /dev/null; }
# The 15 kernels that took longest (time, share of the step's kernel time,
# launches, achieved DRAM rate and its share of the peak), then the rest.
post_profile() {
  [[ -s "$logs/profile.tsv" ]] || return 0
  awk -F'\t' -v gbps="$PEAK_GBPS" -v note="$FIGURES_NOTE" '
    NR == 1 { next }
    NR <= 16 {
      printf "  #%d\t\t\t\t%s%.3f ms = %.1f%%, %d launches, %.0f GB/s = %.1f%% of %g: %s\n", NR - 1, note,
        $3, $4, $2, $5, 100 * $5 / gbps, gbps, $1
      next
    }
    { kernels++; launches += $2; ms += $3; share += $4 }
    END {
      if (kernels) printf "  rest\t\t\t\t%s%.3f ms = %.1f%%, %d launches of %d more kernels\n", note, ms,
        share, launches, kernels
    }' "$logs/profile.tsv"
}

# ---- running a step ----------------------------------------------------------------------

export -f detail gtest_verdict gtest_rows gtest_step bench_step no_device mpiasr_train bench_value \
  pytorch_row
export -f step_probe step_allocator step_kernels step_train_step step_train step_resume step_eval \
  step_nccl_mpirun step_nccl_single step_bench_ops step_bench_medium step_bench_large step_pytorch \
  step_profile step_memcheck

run_step() {  # name [needs]
  local name=$1 budget=${budgets[$1]} needs=${2:-} now left limit began rc result seconds details
  now=$(date +%s)
  left=$((deadline - now))
  if [[ -n "$needs" && "${status[$needs]:-}" != PASS ]]; then
    # Skipped with what it needs (no GPU), or not run because that failed.
    result=$([[ "${status[$needs]:-}" == SKIP ]] && echo SKIP || echo "NOT RUN")
    status[$name]=$result
    add_row "$name" "$result" 0 "$budget" "needs $needs, which did not pass"
    publish
    return
  fi
  if ((left < 5)); then
    status[$name]="NOT RUN"
    add_row "$name" "NOT RUN" 0 "$budget" "out of time: no step starts after $((deadline - start)) s"
    publish
    return
  fi
  limit=$((budget < left ? budget : left))
  note "$name (up to $limit s)"
  began=$(date +%s)
  STEP=$name CUBLASLT_LOG_LEVEL=1 CUBLASLT_LOG_FILE="$logs/$name.cublaslt.%i.log" \
    timeout -k 5 "$limit" bash -c "set -o pipefail; step_$name" > "$logs/$name.log" 2>&1
  rc=$?
  seconds=$(($(date +%s) - began))
  case $rc in
    0) result=PASS ;;
    77) result=SKIP ;;
    124 | 137) result=TIMEOUT ;;
    *) result=FAIL ;;
  esac
  details=$(cat "$logs/$name.details" 2> /dev/null)
  # cuBLASLt's own log of a failed call, into the step's log and its details.
  local cublaslt
  cublaslt=$(cat "$logs/$name".cublaslt.*.log 2> /dev/null)
  if [[ -n "$cublaslt" ]]; then
    printf '\n---- cuBLASLt log (%s.cublaslt.*.log) ----\n%s\n' "$name" "$cublaslt" >> "$logs/$name.log"
    details="${details:+$details; }cuBLASLt logged: $(head -n 1 <<< "$cublaslt")"
  fi
  # A GPU that nvidia-smi lists and the CUDA runtime does not use is a fault, not a skip.
  if [[ $result == SKIP && $gpus -gt 0 && "$details" == *"no CUDA device"* ]]; then
    result=FAIL
    details="nvidia-smi lists $gpus GPU(s), but: $details"
  fi
  if [[ $result == TIMEOUT ]]; then
    details="killed after $limit s${details:+; $details}; last line: $(tail -n 1 "$logs/$name.log")"
  fi
  status[$name]=$result
  add_row "$name" "$result" "$seconds" "$budget" "$details"
  if [[ $result != SKIP ]] && declare -F "post_$name" > /dev/null; then "post_$name" >> "$rows"; fi
  note "$name: $result ${details:0:150}"
  publish
}

# ---- the run ----------------------------------------------------------------------------

note "unpacking $bundle_dir/payload.tar.xz into $B"
if command -v xz > /dev/null; then
  xz -dc "$bundle_dir/payload.tar.xz" | tar -x -C "$B"
else
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "$bundle_dir/payload.tar.xz" "$B"
fi
if [[ $? -ne 0 || ! -f "$B/env.sh" ]]; then
  add_row unpack FAIL "$(($(date +%s) - start))" - "could not unpack $bundle_dir/payload.tar.xz (xz or python3 needed)"
  publish
  cat "$out/summary.txt"
  exit 1
fi
cp "$bundle_dir/bundle-info.txt" "$logs/" 2> /dev/null
# shellcheck source=env.sh
source "$B/env.sh" > "$logs/libraries.log" 2>&1
export -f bundle_run
cat "$logs/libraries.log"
# Without the driver (libcuda.so.1) the GPU steps skip; without the others nothing of ours loads.
missing="${MPIASR_MISSING_LIBS//libcuda.so.1 /}"
found="$(sed -nE 's/^  ([^ ]+) +([^ ]+)\/[^/ ]+ -> [^ ]+ \((.*)\)$/\1 \2 (\3)/p; s/^  ([^ ]+) +NOT FOUND$/\1 not found/p' \
  "$logs/libraries.log" | paste -sd ';' | sed 's/;/; /g')"
add_row libraries "$([[ -n "$missing" ]] && echo FAIL || echo PASS)" 0 - "$found"
publish

run_step probe
if [[ ${status[probe]} == PASS ]]; then
  gpus=$(grep -c . "$logs/gpus.csv")
  device="$(head -n 1 "$logs/gpus.csv")"
fi
export gpus
run_step allocator
run_step kernels
run_step train_step
run_step train
run_step resume train
run_step eval train
run_step nccl_mpirun
run_step nccl_single
run_step bench_ops
run_step bench_medium
run_step bench_large
run_step pytorch
run_step profile
run_step memcheck

note "done"
cat "$out/summary.txt"
bad=$(awk -F'\t' '$1 !~ /^  / && ($2 == "FAIL" || $2 == "TIMEOUT" || $2 == "NOT RUN") { n++ }
  END { print n + 0 }' "$rows")
exit $((bad > 0 ? 1 : 0))
