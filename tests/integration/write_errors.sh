#!/usr/bin/env bash
# Every write the commands make that fails names the system's reason and
# exits with the code of whose file it is (README, "Exit codes": 2 an output
# file or folder, 4 a checkpoint), never 1 (internal error):
#   1. not a folder: eval --out under a plain file (train's output.dir under
#      one is hostile_input.sh's);
#   2. no space: eval --out /dev/full; train's metrics file and tokenizer on
#      a full tmpfs; a checkpoint that does not fit a small one (and leaves
#      no partial folder behind);
#   3. read-only filesystem: eval --out, train's output.dir, tokenizer and
#      checkpoint folder on a tmpfs remounted read-only;
#   4. permission denied: eval --out and train's output.dir in a folder the
#      user may not write (as root, run as user nobody).
# The mounts are made in a mount namespace of the script's own, gone when it
# ends. A mechanism this machine does not allow (mount, setpriv) is reported
# as SKIP with the reason, and the script then exits 77 (ctest: skipped)
# after the checks it could run.
# Usage: bash write_errors.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
if [[ -z "${MPIASR_OWN_MOUNTS:-}" ]] && unshare --mount --propagation private true 2>/dev/null; then
  MPIASR_OWN_MOUNTS=1 exec unshare --mount --propagation private bash "$0" "$@"
fi
# shellcheck source=tests/integration/lib/train_runs.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/train_runs.sh"
train_setup "$1" "$2" write_errors

skipped=()
skip() {
  echo "SKIP: $*"
  skipped+=("$*")
}

# mount_tmpfs DIR SIZE: a tmpfs of SIZE at DIR (made), in the script's own
# mount namespace; fails, saying why in $work/mount.err, where there is none.
mounted=()
mount_tmpfs() {
  [[ -n "${MPIASR_OWN_MOUNTS:-}" ]] ||
    { echo "no mount namespace of its own (unshare --mount failed)" >"$work/mount.err"; return 1; }
  mkdir -p "$1"
  mount -t tmpfs -o "size=$2" tmpfs "$1" 2>"$work/mount.err" || return 1
  mounted+=("$1")
}

run_ok "$work/model.log" "$mpiasr" train "$tiny" "${tiny_options[@]}" --training.max_steps=2 \
  --output.dir="$work/model"
eval_to=("$mpiasr" eval --ckpt "$work/model" --manifest "$corpus/test.tsv" --out)
train_in=("$mpiasr" train "$tiny" "${tiny_options[@]}" --training.max_steps=1)

# 1. Not a folder.
echo x >"$work/plain"
expect_exit 2 eval_not_folder "${eval_to[@]}" "$work/plain/hyps.tsv"
expect_line "$work/eval_not_folder.err" \
  "^mpiasr eval: error: cannot create $work/plain/hyps.tsv: a part of the path is not a folder" \
  "eval --out under a file"

# 2. No space left.
expect_exit 2 eval_full "${eval_to[@]}" /dev/full
expect_line "$work/eval_full.err" \
  "^mpiasr eval: error: cannot write /dev/full: no space left on the device" "eval --out /dev/full"
if mount_tmpfs "$work/full" 64k && mount_tmpfs "$work/small" 256k; then
  head -c 1M /dev/zero >"$work/full/filler" 2>/dev/null || true
  expect_exit 2 metrics_full "${train_in[@]}" --output.dir="$work/metrics_full" \
    --output.metrics_file="$work/full/metrics.jsonl"
  expect_line "$work/metrics_full.err" \
    "^mpiasr train: error: cannot write $work/full/metrics.jsonl: no space left on the device" \
    "metrics file on a full disk"
  expect_exit 2 tokenizer_full "${train_in[@]}" --output.dir="$work/tokenizer_full" \
    --tokenizer.model_path="$work/full/tokens.txt"
  expect_line "$work/tokenizer_full.err" \
    "^mpiasr train: error: cannot write $work/full/tokens.txt.tmp: no space left on the device" \
    "tokenizer on a full disk"
  expect_exit 4 checkpoint_full "${train_in[@]}" --output.dir="$work/checkpoint_full" \
    --checkpoint.dir="$work/small/checkpoints"
  expect_line "$work/checkpoint_full.err" \
    "^mpiasr train: error: cannot write $work/small/checkpoints/\\.tmp-step-00000001-[0-9]+/[a-z.]+: no space left on the device" \
    "checkpoint on a small disk"
  leftover=$(find "$work/small/checkpoints" -mindepth 1)
  [[ -z "$leftover" ]] || fail "the failed checkpoint left $leftover"
else
  skip "no-space checks on a tmpfs: $(cat "$work/mount.err")"
fi

# 3. Read-only filesystem: a tmpfs holding the folder run/, remounted read-only.
if mount_tmpfs "$work/ro" 1m && mkdir "$work/ro/run" && mount -o remount,ro "$work/ro" 2>"$work/mount.err"; then
  expect_exit 2 eval_ro "${eval_to[@]}" "$work/ro/run/hyps.tsv"
  expect_line "$work/eval_ro.err" \
    "^mpiasr eval: error: cannot create $work/ro/run/hyps.tsv: read-only filesystem" "eval --out"
  expect_exit 2 train_ro "${train_in[@]}" --output.dir="$work/ro/run"
  expect_line "$work/train_ro.err" \
    "^mpiasr train: error: cannot create $work/ro/run/mpiasr.lock: read-only filesystem" "output.dir"
  expect_exit 2 tokenizer_ro "${train_in[@]}" --output.dir="$work/tokenizer_ro" \
    --tokenizer.model_path="$work/ro/run/tokens.txt"
  expect_line "$work/tokenizer_ro.err" \
    "^mpiasr train: error: cannot create $work/ro/run/tokens.txt.tmp: read-only filesystem" \
    "tokenizer.model_path"
  expect_exit 4 checkpoint_ro "${train_in[@]}" --output.dir="$work/checkpoint_ro" \
    --checkpoint.dir="$work/ro/run/checkpoints"
  expect_line "$work/checkpoint_ro.err" \
    "^mpiasr train: error: cannot create $work/ro/run/checkpoints: read-only filesystem" \
    "checkpoint.dir"
else
  skip "read-only checks on a tmpfs: $(cat "$work/mount.err")"
fi

# 4. Permission denied: root writes anywhere, so as root the commands run as
#    user nobody, in a folder of root's.
mkdir -p "$work/locked"
chmod 755 "$work/locked"
as_user=()
if [[ $(id -u) == 0 ]]; then
  if setpriv --reuid=65534 --regid=65534 --clear-groups true 2>"$work/setpriv.err"; then
    as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  else
    skip "permission checks as user nobody: $(cat "$work/setpriv.err")"
  fi
else
  chmod 555 "$work/locked"
fi
if [[ $(id -u) != 0 || ${#as_user[@]} -gt 0 ]]; then
  expect_exit 2 eval_denied "${as_user[@]}" "$mpiasr" eval --ckpt "$work/model" \
    --manifest "$corpus/test.tsv" --out "$work/locked/hyps.tsv"
  expect_line "$work/eval_denied.err" \
    "^mpiasr eval: error: cannot create $work/locked/hyps.tsv: permission denied" "eval --out"
  expect_exit 2 train_denied "${as_user[@]}" "$mpiasr" train "$tiny" "${tiny_options[@]}" \
    --training.max_steps=1 --output.dir="$work/locked"
  expect_line "$work/train_denied.err" \
    "^mpiasr train: error: cannot create $work/locked/mpiasr.lock: permission denied" "output.dir"
fi

if ((${#skipped[@]} > 0)); then
  printf 'write_errors: skipped: %s\n' "${skipped[@]}"
  exit 77
fi
for dir in "${mounted[@]}"; do umount "$dir"; done
rm -rf "$work"
echo "write_errors: all checks passed"
