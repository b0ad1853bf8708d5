#!/usr/bin/python3
"""Replays an mpiasr training run in PyTorch, step by step on the same batches.

    mpiasr train CONFIG --output.dir=RUN --output.batch_log=true --training.log_every=1
    /usr/bin/python3 scripts/pytorch/train_reference.py --run RUN --init CKPT \\
        [--steps N] [--dropout P] [--out reference.jsonl]

The model (conformer_ctc.py) starts from the weights of CKPT (a step folder
of an mpiasr run: the same initialization, when CKPT is the run's step 0, as
`mpiasr train ... --stop-at-step 0` writes it) and trains on the batches
mpiasr logged (RUN/batches/rank-*.jsonl: every rank's micro-batches of every
step, their audio and target ids). Its features are this folder's front end
on the audio, normalized with RUN's CMVN statistics. One step is mpiasr's
recipe, written here independently with PyTorch's own operators:

  loss      CTC summed over every utterance of every rank's micro-batches of
            the step (impossible alignments zeroed, as training.zero_infinity),
            divided by the step's target tokens (all ranks)
  clipping  torch.nn.utils.clip_grad_norm_ to optimizer.clip_norm
  AdamW     torch.optim.AdamW with optimizer.beta1, beta2, eps; weight decay on
            the Linear and convolution weights only (tensors of rank >= 2)
  schedule  schedule.type warmup_cosine or constant: lr t / warmup up to the
            warmup, then min_lr + (lr - min_lr) (1 + cos(pi progress)) / 2
            over the run's total steps (state.json of CKPT)
  dropout   --dropout (default: the model's, 0.1 for the presets) at mpiasr's
            sites; PyTorch's masks, not mpiasr's, so a run with dropout
            matches mpiasr in distribution only: compare with --dropout 0 and
            mpiasr's model.dropout=0 for step-by-step agreement

--check-init first compares every tensor of CKPT with PyTorch's default
initialization of its module (nn.Linear, nn.Conv1d/2d: U(-1/sqrt(fan_in),
1/sqrt(fan_in)); nn.LayerNorm: 1 and 0).

Prints one line per step (loss, gradient norm before clipping, lr) and, with
--compare RUN/metrics.jsonl (mpiasr's, log_every 1), mpiasr's loss and norm
beside them. --out writes the same as JSON lines. Runs in float32 unless
--float64.
"""

import argparse
import collections
import json
import math
import pathlib
import sys

import numpy as np
import soundfile
import torch
import torch.nn.functional as F
import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import conformer_ctc  # noqa: E402


def read_batches(run):
    """step -> [(rank, micro_batch, utterances)], from RUN/batches/rank-*.jsonl."""
    files = sorted((pathlib.Path(run) / "batches").glob("rank-*.jsonl"))
    if not files:
        sys.exit(f"{run}/batches: no rank-*.jsonl (train with --output.batch_log=true)")
    steps = collections.defaultdict(list)
    for path in files:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            try:
                record = json.loads(line)
                steps[int(record["step"])].append(
                    (int(record["rank"]), int(record["micro_batch"]), record["utterances"]))
            except (ValueError, KeyError) as error:
                sys.exit(f"{path}:{number}: not a batch record ({error})")
    return {step: sorted(batches, key=lambda b: b[:2]) for step, batches in steps.items()}


def read_audio(utterance, sample_rate):
    samples, rate = soundfile.read(utterance["audio"], dtype="float32", always_2d=True)
    if rate != sample_rate:
        sys.exit(f"{utterance['audio']}: {rate} Hz; this replay reads audio at the model's "
                 f"{sample_rate} Hz only")
    samples = samples.mean(axis=1)
    first, duration = round(utterance["offset"] * rate), utterance["duration"]
    last = len(samples) if duration < 0 else min(len(samples), first + round(duration * rate))
    return samples[first:last]


def make_batch(utterances, frontend, dtype):
    """Zero-padded features [B, T, n_mels], lengths, targets (concatenated)."""
    features = []
    for u in utterances:
        x = frontend(torch.from_numpy(read_audio(u, frontend.sample_rate)))
        if x.shape[0] != u["frames"]:
            sys.exit(f"{u['audio']}: {x.shape[0]} feature frames, mpiasr had {u['frames']}")
        features.append(x.to(dtype))
    lengths = torch.tensor([x.shape[0] for x in features])
    padded = torch.zeros(len(features), int(lengths.max()), features[0].shape[1], dtype=dtype)
    for b, x in enumerate(features):
        padded[b, :x.shape[0]] = x
    targets = torch.tensor([t for u in utterances for t in u["targets"]], dtype=torch.long)
    target_lengths = torch.tensor([len(u["targets"]) for u in utterances])
    return padded, lengths, targets, target_lengths


def learning_rate(config, step, total_steps):
    optimizer, schedule = config["optimizer"], config["schedule"]
    peak, kind = float(optimizer["lr"]), schedule["type"]
    if kind == "constant":
        return peak
    if kind != "cosine":
        sys.exit(f"schedule.type {kind}: only cosine and constant are replayed")
    warmup, floor = int(schedule["warmup_steps"]), float(schedule["min_lr"])
    if step <= warmup:
        return peak * step / warmup
    progress = min(1.0, (step - warmup) / (total_steps - warmup))
    return floor + (peak - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def read_mpiasr_metrics(path):
    losses = {}
    for line in pathlib.Path(path).read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") == "train":
            losses[int(record["step"])] = (record["loss"], record["grad_norm"])
    return losses


def check_initialization(model):
    """Compares each tensor of `model` (mpiasr's initialization) with PyTorch's
    default initialization of the same module: LayerNorm weights 1 and biases
    0 exactly; every other tensor of at least 1,000 values with a standard
    deviation within 10% of a freshly built module's. Returns the failures."""
    fresh = dict(conformer_ctc.ConformerCTC(model.architecture).named_parameters())
    failures = []
    for name, ours in model.named_parameters():
        theirs = fresh[name].detach().to(ours.dtype)
        if ours.shape != theirs.shape:
            failures.append(f"{name}: shape {tuple(ours.shape)}, PyTorch's {tuple(theirs.shape)}")
        elif "norm" in name:
            if not torch.equal(ours, theirs):
                failures.append(f"{name}: not PyTorch's LayerNorm initialization")
        elif ours.numel() >= 1000:
            ratio = float(ours.std() / theirs.std())
            if not 0.9 <= ratio <= 1.1:
                failures.append(f"{name}: standard deviation {float(ours.std()):.4g}, "
                                f"PyTorch's {float(theirs.std()):.4g}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="the mpiasr run's output.dir")
    parser.add_argument("--init", required=True, help="the checkpoint folder to start from")
    parser.add_argument("--steps", type=int, help="steps to replay (default: all logged)")
    parser.add_argument("--dropout", type=float, help="dropout (default: the run's model)")
    parser.add_argument("--compare", help="mpiasr's metrics.jsonl, trained with log_every 1")
    parser.add_argument("--out", help="write the steps as JSON lines here")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--float64", action="store_true")
    parser.add_argument("--check-init", action="store_true",
                        help="first compare CKPT's tensors with PyTorch's default initialization "
                        "(CKPT must be step 0); exit 1 when one differs")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dtype = torch.float64 if args.float64 else torch.float32
    init = pathlib.Path(args.init)
    config = yaml.safe_load((init / "config.yaml").read_text())
    state = json.loads((init / "state.json").read_text())
    for key, off in (("spec_augment", "enabled"), ("data", "speed_perturb")):
        if config[key][off]:
            sys.exit(f"{key}.{off} is on in {init}/config.yaml: not replayed here")
    if float(config["features"]["dither"]) != 0:
        sys.exit("features.dither is not 0: not replayed here")
    if config["precision"]["mode"] != "fp32":
        sys.exit("precision.mode is not fp32: not replayed here")

    model, frontend = conformer_ctc.load_checkpoint(init, dtype)
    if args.check_init:
        failures = check_initialization(model)
        for failure in failures:
            print(f"initialization: {failure}")
        if failures:
            return 1
        print(f"initialization: every tensor as PyTorch's default "
              f"({sum(1 for _ in model.parameters())} tensors)")
    dropout = args.dropout
    if dropout is None:
        dropout = config["model"]["dropout"]
        dropout = 0.1 if dropout is None else float(dropout)  # the presets' (model/presets.h)
    conformer_ctc.set_dropout(model, dropout).train()
    optim = config["optimizer"]
    decayed = [p for p in model.parameters() if p.dim() >= 2]
    others = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decayed, "weight_decay": float(optim["weight_decay"])},
         {"params": others, "weight_decay": 0.0}],
        lr=0.0, betas=(float(optim["beta1"]), float(optim["beta2"])), eps=float(optim["eps"]))
    clip_norm = float(optim["clip_norm"])
    total_steps = int(state["schedule"]["total_steps"])

    steps = read_batches(args.run)
    first = int(state["step"]) + 1
    last = max(steps) if args.steps is None else first + args.steps - 1
    theirs = read_mpiasr_metrics(args.compare) if args.compare else {}
    out = open(args.out, "w") if args.out else None
    print(f"replaying steps {first}..{last} from {init} in {dtype}, dropout {dropout}")
    for step in range(first, last + 1):
        if step not in steps:
            sys.exit(f"{args.run}/batches: no batches of step {step}")
        batches = [make_batch(u, frontend, dtype) for _, _, u in steps[step]]
        tokens = max(1, sum(int(b[3].sum()) for b in batches))
        lr = learning_rate(config, step, total_steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad()
        loss_sum = 0.0
        for features, lengths, targets, target_lengths in batches:
            logprobs, out_lengths = model(features, lengths)
            loss = F.ctc_loss(logprobs.transpose(0, 1), targets, out_lengths, target_lengths,
                              reduction="sum", zero_infinity=True)
            (loss / tokens).backward()
            loss_sum += float(loss)
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(),
                                                    clip_norm if clip_norm > 0 else math.inf))
        optimizer.step()
        record = {"step": step, "loss": loss_sum / tokens, "grad_norm": norm, "lr": lr}
        line = f"step {step:5d}  loss {record['loss']:.4f}  grad_norm {norm:.4f}  lr {lr:.3e}"
        if step in theirs:
            record["mpiasr_loss"], record["mpiasr_grad_norm"] = theirs[step]
            line += (f"  | mpiasr loss {theirs[step][0]:.4f}  grad_norm {theirs[step][1]:.4f}"
                     f"  diff {record['loss'] - theirs[step][0]:+.4f}")
        print(line, flush=True)
        if out:
            out.write(json.dumps(record) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
