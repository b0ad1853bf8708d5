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

With --adapt-steps N (a dump of `mpiasr eval --adapt-steps N`, whose batches
hold one utterance each) the module is adapted to each utterance as
src/test_time_adaptation.h adapts mpiasr's, by torch.optim.Adam on its
LayerNorm parameters and autograd, starting from the checkpoint's weights
every time, and its adapted log-probs must match; the adaptation must also
move them by more than 10 times the tolerance, or the check proves nothing.
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


def adapt(model, features, lengths, steps, learning_rate, temperature):
    """Test-time adaptation as mpiasr's: steps Adam steps (no weight decay) on
    every LayerNorm parameter down the mean entropy of softmax(log-probs /
    temperature) over the frames whose best output is not the blank (all
    frames when none is), for one utterance."""
    norms = [p for m in model.modules() if isinstance(m, torch.nn.LayerNorm) for p in m.parameters()]
    optimizer = torch.optim.Adam(norms, lr=learning_rate, betas=(0.9, 0.999), eps=1e-8)
    for _ in range(steps):
        logprobs, out_lengths = model(features, lengths)
        frames = logprobs[0, :int(out_lengths[0])]
        q = torch.log_softmax(frames / temperature, dim=-1)
        entropy = -(q.exp() * q).sum(-1)
        used = frames.argmax(-1) != 0
        if not used.any():
            used = torch.ones_like(used)
        optimizer.zero_grad()
        entropy[used].mean().backward()
        optimizer.step()


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
    parser.add_argument("--adapt-steps", type=int, default=0,
                        help="the dump's test-time adaptation steps (eval --adapt-steps)")
    parser.add_argument("--adapt-lr", type=float, default=1e-3, help="eval --adapt-lr")
    parser.add_argument("--adapt-temperature", type=float, default=1.0,
                        help="eval --adapt-temperature")
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

    worst_logprob, frames_checked, least_moved = 0.0, 0, float("inf")
    checkpoint_weights = {name: value.clone() for name, value in model.state_dict().items()}
    worst_feature, worst_end_to_end, features_checked = 0.0, 0.0, 0
    for k in batches:
        get = lambda name: tensors[f"batch.{k}.{name}"]  # noqa: E731
        features, lengths = get("features"), get("frame_lengths").long()
        expected, expected_lengths = get("logprobs"), get("output_lengths").long()
        if args.adapt_steps:
            if features.shape[0] != 1:
                parser.error(f"batch {k} holds {features.shape[0]} utterances: --adapt-steps "
                             "needs the dump of an eval with --adapt-steps")
            model.load_state_dict(checkpoint_weights)
            with torch.no_grad():
                unadapted, _ = model(features.to(dtype), lengths)
            adapt(model, features.to(dtype), lengths, args.adapt_steps, args.adapt_lr,
                  args.adapt_temperature)
        with torch.no_grad():
            logprobs, out_lengths = model(features.to(dtype), lengths)
        if args.adapt_steps:
            length = int(out_lengths[0])
            least_moved = min(least_moved, float(
                (logprobs[0, :length] - unadapted[0, :length]).abs().max()))
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
    if args.adapt_steps:
        ok = least_moved > 10 * args.tolerance
        print(f"adaptation: {args.adapt_steps} steps moved every utterance's log-probs by at "
              f"least {least_moved:.3g} (max |difference| per utterance; "
              f"{'ok' if ok else 'FAIL'}, more than 10 x the tolerance)")
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
