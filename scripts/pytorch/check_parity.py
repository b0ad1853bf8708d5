#!/usr/bin/python3
"""Checks that the PyTorch Conformer-CTC (conformer_ctc.py) reproduces mpiasr.

    mpiasr eval --ckpt CKPT --manifest M --dump-logprobs dump.safetensors
    /usr/bin/python3 scripts/pytorch/check_parity.py --dump dump.safetensors

For every batch in the dump (eval's padded batches: features, lengths and
log-probs, see src/eval_command.cpp) the PyTorch module runs on mpiasr's
features and its log-probabilities must match mpiasr's on every valid frame
within --tolerance (max absolute difference; padding frames are ignored) and
the output lengths exactly. The features are checked too: for each utterance
whose audio is a 16-bit PCM WAV at the model's rate (the Python standard
library reads those), the PyTorch front end's features must match mpiasr's
within --feature-tolerance, and the model's log-probs on them are reported.
Prints one line per check and exits 1 when one fails.

Runs in float64 by default, so the differences measure mpiasr's float32
arithmetic; --float32 runs the module as a float32 deployment would.
"""

import argparse
import json
import pathlib
import sys
import wave

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import conformer_ctc  # noqa: E402


def read_wav(path, offset, duration, sample_rate):
    """Samples of a 16-bit PCM WAV segment as libsndfile gives them (x / 32768),
    or None when the file is not such a WAV at sample_rate."""
    try:
        with wave.open(str(path), "rb") as f:
            if f.getsampwidth() != 2 or f.getframerate() != sample_rate:
                return None
            channels = f.getnchannels()
            data = np.frombuffer(f.readframes(f.getnframes()), dtype="<i2").astype(np.float64)
    except (wave.Error, EOFError, OSError):
        return None
    data = data.reshape(-1, channels).mean(axis=1) / 32768.0
    first = round(offset * sample_rate)
    last = len(data) if duration < 0 else min(len(data), round((offset + duration) * sample_rate))
    return data[first:last].astype(np.float32)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", help="a step-NNNNNNNN checkpoint folder (default: the one "
                        "the dump was made with)")
    parser.add_argument("--dump", required=True, help="the file of `mpiasr eval --dump-logprobs`")
    parser.add_argument("--tolerance", type=float, default=1e-4,
                        help="largest absolute log-prob difference on mpiasr's features (1e-4)")
    parser.add_argument("--feature-tolerance", type=float, default=1e-3,
                        help="largest absolute difference of the normalized features (1e-3)")
    parser.add_argument("--float32", action="store_true", help="run the module in float32")
    parser.add_argument("--n-heads", type=int, help="attention heads, for model files without "
                        "the architecture metadata (presets: tiny 2, small 4, medium 4, large 8)")
    args = parser.parse_args()

    dtype = torch.float32 if args.float32 else torch.float64
    torch.set_num_threads(1)
    tensors, metadata = conformer_ctc.read_safetensors(args.dump)
    checkpoint = args.ckpt or metadata["checkpoint"]
    if pathlib.Path(checkpoint).resolve() != pathlib.Path(metadata["checkpoint"]).resolve():
        print(f"warning: the dump was made with {metadata['checkpoint']}, not {checkpoint}")
    try:
        model, frontend = conformer_ctc.load_checkpoint(checkpoint, dtype, args.n_heads)
    except ValueError as error:
        parser.error(f"{error} (--n-heads)")
    utterances = json.loads(metadata["utterances"])
    batches = sorted({int(name.split(".")[1]) for name in tensors})
    failed = False

    worst_logprob, frames_checked = 0.0, 0
    worst_feature, worst_end_to_end, features_checked = 0.0, 0.0, 0
    for k in batches:
        get = lambda name: tensors[f"batch.{k}.{name}"]  # noqa: E731
        features, lengths = get("features"), get("frame_lengths").long()
        expected, expected_lengths = get("logprobs"), get("output_lengths").long()
        with torch.no_grad():
            logprobs, out_lengths = model(features.to(dtype), lengths)
        if not torch.equal(out_lengths, expected_lengths):
            print(f"batch {k}: output lengths {out_lengths.tolist()} != mpiasr's "
                  f"{expected_lengths.tolist()}")
            failed = True
            continue
        for b, length in enumerate(out_lengths.tolist()):
            diff = (logprobs[b, :length].double() - expected[b, :length].double()).abs()
            worst_logprob = max(worst_logprob, float(diff.max()) if length else 0.0)
            frames_checked += length

            # The front end, on the audio itself.
            u = utterances[int(get("utterances")[b])]
            samples = read_wav(u["audio"], u["offset"], u["duration"], frontend.sample_rate)
            if samples is None:
                continue
            ours = frontend(torch.from_numpy(samples))
            theirs = features[b, :int(lengths[b])]
            if ours.shape != theirs.shape:
                print(f"{u['audio']}: {ours.shape[0]} feature frames, mpiasr has {theirs.shape[0]}")
                failed = True
                continue
            worst_feature = max(worst_feature, float((ours - theirs.to(dtype)).abs().max()))
            with torch.no_grad():
                end_to_end, _ = model(ours[None], lengths[b:b + 1])
            worst_end_to_end = max(worst_end_to_end, float(
                (end_to_end[0, :length].double() - expected[b, :length].double()).abs().max()))
            features_checked += 1

    ok = worst_logprob <= args.tolerance and frames_checked > 0
    print(f"log-probs on mpiasr's features: max |difference| {worst_logprob:.3g} over "
          f"{frames_checked} frames of {len(batches)} batches "
          f"({'ok' if ok else 'FAIL'}, tolerance {args.tolerance:g})")
    failed = failed or not ok
    if features_checked:
        ok = worst_feature <= args.feature_tolerance
        print(f"features from the audio: max |difference| {worst_feature:.3g} over "
              f"{features_checked} utterances ({'ok' if ok else 'FAIL'}, tolerance "
              f"{args.feature_tolerance:g}); log-probs from them: max |difference| "
              f"{worst_end_to_end:.3g}")
        failed = failed or not ok
    else:
        print("features from the audio: not checked (no 16-bit WAV at the model's rate)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
