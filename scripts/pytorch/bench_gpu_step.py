"""PyTorch's speed at cuda_train_bench's training step, beside mpiasr's in the
GPU check (scripts/gpu-bundle/run.sh, step `pytorch`).

The same Conformer-CTC (conformer_ctc.py in this folder) of a preset of
model/presets.cpp, on cuda_train_bench's batch (model/bench/gpu_bench_batch.h):
--batch utterances of --frames frames of N(0, 1) features, frames / 10 random
target tokens each of a 128-token vocabulary, dropout 0.1. One step is
conformer_ctc.training_step: forward under bf16 autocast (or in fp32 with
--precision=fp32), attention by
scaled_dot_product_attention where PyTorch has it (2.0 and later; written out
otherwise), CTC summed over the batch and divided by its tokens, backward,
clipping to 5, AdamW with mpiasr's defaults (lr 1e-4, betas 0.9 and 0.98, eps
1e-9, weight decay 1e-3; fused on a GPU). cuDNN times its convolution
algorithms (cudnn.benchmark).

Timed twice: eager, then with torch.compile on each Conformer block (the
blocks have the same shapes, so they share one compiled graph; the first
compiled step, compilation included, is timed apart). Each: --warmup steps,
then --steps steps, their times taken between CUDA events recorded after each
step (the host does not wait in between), or by the host's clock on the CPU;
the median is printed.

    python3 bench_gpu_step.py --preset=large [--batch=32 --frames=1500] [--device=cuda]
        [--precision=bf16] [--steps=10 --warmup=3]

prints, e.g.
    torch 2.9.0+cu130, CUDA 13.0, cuDNN 91200, NVIDIA H200
    large: 116527232 parameters, batch 32 x 1500 frames, bf16 autocast, attention scaled_dot_product_attention
    eager: 95.123 ms/step (median of 10 steps after 3)
    compile: 70.456 ms/step (median of 10 steps after 3; the first compiled step took 23.1 s)
with, for a compile that cannot run, "compile: SKIP (why)", and exits 0.
Without PyTorch, or without its CUDA on --device=cuda, it prints "SKIP (why)"
and exits 77.
"""

import argparse
import os
import statistics
import sys
import time

try:
    import torch
except (ImportError, OSError) as error:  # not installed, or its libraries do not load
    print(f"SKIP (no PyTorch: {error})")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conformer_ctc  # noqa: E402

# model/presets.cpp: d_model, layers, heads, subsampling channels.
PRESETS = {"tiny": (32, 2, 2, 32), "small": (144, 6, 4, 144), "medium": (256, 18, 4, 256),
           "large": (512, 18, 8, 512)}
VOCAB, DROPOUT, CLIP_NORM = 128, 0.1, 5.0


def step_times(step, steps, device):
    """Milliseconds of each of `steps` calls of step()."""
    if device.type == "cuda":
        events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
        events[0].record()
        for event in events[1:]:
            step()
            event.record()
        events[-1].synchronize()
        return [begin.elapsed_time(end) for begin, end in zip(events, events[1:])]
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(1000 * (time.perf_counter() - start))
    return times


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), required=True)
    parser.add_argument("--batch", type=int, default=32, help="utterances (32)")
    parser.add_argument("--frames", type=int, default=1500, help="frames per utterance (1500)")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--precision", choices=["bf16", "fp32"], default="bf16",
                        help="bf16 autocast (default) or fp32: Debian's PyTorch 1.13 has no "
                        "bf16 LayerNorm under the CPU's autocast")
    parser.add_argument("--steps", type=int, default=10, help="steps timed (10)")
    parser.add_argument("--warmup", type=int, default=3, help="steps before those (3)")
    args = parser.parse_args()

    device = torch.device(args.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            print(f"SKIP (PyTorch {torch.__version__} finds no CUDA device: CUDA "
                  f"{torch.version.cuda or 'not built in'})")
            return 77
        print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN "
              f"{torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
        torch.backends.cudnn.benchmark = True
    else:
        print(f"torch {torch.__version__}, CPU, torch.get_num_threads() {torch.get_num_threads()}")
    torch.manual_seed(1)

    d_model, layers, heads, channels = PRESETS[args.preset]
    architecture = {"n_mels": 80, "d_model": d_model, "n_layers": layers, "n_heads": heads,
                    "ff_mult": 4, "conv_kernel": 31, "subsampling_channels": channels,
                    "vocab_size": VOCAB, "layernorm_eps": 1e-5}
    model = conformer_ctc.ConformerCTC(architecture)
    conformer_ctc.set_dropout(model, DROPOUT).to(device).train()
    sdpa = hasattr(torch.nn.functional, "scaled_dot_product_attention")
    conformer_ctc.set_sdpa(model, sdpa)
    fused = {"fused": True} if device.type == "cuda" else {}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9,
                                  weight_decay=1e-3, **fused)
    batch = conformer_ctc.random_batch(args.batch, args.frames, args.frames // 10,
                                       architecture["n_mels"], VOCAB, device)
    autocast = torch.bfloat16 if args.precision == "bf16" else None
    precision = "bf16 autocast" if autocast else "fp32"
    print(f"{args.preset}: {sum(p.numel() for p in model.parameters())} parameters, batch "
          f"{args.batch} x {args.frames} frames, {precision}, attention "
          f"{'scaled_dot_product_attention' if sdpa else 'written out (no scaled_dot_product_attention)'}",
          flush=True)

    def step():
        conformer_ctc.training_step(model, optimizer, batch, CLIP_NORM, autocast)

    def timed(mode, note=""):
        for _ in range(args.warmup):
            step()
        milliseconds = statistics.median(step_times(step, args.steps, device))
        print(f"{mode}: {milliseconds:.3f} ms/step (median of {args.steps} steps after "
              f"{args.warmup}{note})", flush=True)

    timed("eager")
    if not hasattr(torch, "compile"):
        print(f"compile: SKIP (torch {torch.__version__} has no torch.compile)")
        return 0
    try:
        for i, block in enumerate(model.encoder.layers):
            model.encoder.layers[i] = torch.compile(block)
        synchronize(device)
        start = time.perf_counter()
        step()
        synchronize(device)
        timed("compile", f"; the first compiled step took {time.perf_counter() - start:.1f} s")
    except Exception as error:  # a compiler that is missing or fails here: no figure, no failure
        first_line = (str(error).strip().splitlines() or [""])[0]
        print(f"compile: SKIP (torch.compile failed: {type(error).__name__}: {first_line[:300]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
