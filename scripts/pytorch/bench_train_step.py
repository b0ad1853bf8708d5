"""PyTorch's speed at mpiasr's training step: the peer of model/bench/model_bench's
BM_small_step, for scripts/bench-peer.sh.

The same Conformer-CTC (conformer_ctc.py in this folder: d 144, 6 layers, 4
heads, feed-forward 4d, depthwise kernel 31, 144 subsampling channels, 80 mels,
a vocabulary of 256), in fp32, with dropout 0.1 where mpiasr has it (after the
feed-forward activation and output, the attention output projection and the
convolution module's output), on the same batch: 16 utterances of 400 frames
(4 s) of random features, 30 random target tokens each. One step is forward,
CTC loss summed over the batch and divided by the token count, backward,
gradient norm, clipping to 5 and AdamW (lr 1e-4), as the trainer runs it.

    python bench_train_step.py --threads 2 --steps 10 [--warmup 3]

prints one line: threads, seconds per step (median of --steps), audio seconds
per second, and the torch version. Needs PyTorch 2.x; run it from a virtual
environment, e.g. python3 -m venv /tmp/torchpeer && /tmp/torchpeer/bin/pip
install torch numpy pyyaml.
"""

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conformer_ctc  # noqa: E402

BATCH, FRAMES, TOKENS, VOCAB, DROPOUT = 16, 400, 30, 256, 0.1
ARCHITECTURE = {"n_mels": 80, "d_model": 144, "n_layers": 6, "n_heads": 4, "ff_mult": 4,
                "conv_kernel": 31, "subsampling_channels": 144, "vocab_size": VOCAB,
                "layernorm_eps": 1e-5}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1)

    model = conformer_ctc.set_dropout(conformer_ctc.ConformerCTC(ARCHITECTURE), DROPOUT).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = conformer_ctc.random_batch(BATCH, FRAMES, TOKENS, ARCHITECTURE["n_mels"], VOCAB)

    def step():
        conformer_ctc.training_step(model, optimizer, batch, 5.0)

    for _ in range(args.warmup):
        step()
    seconds = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - start)
    median = statistics.median(seconds)
    print(f"threads {args.threads} step_s {median:.4f} audio_s_per_s {BATCH * FRAMES / 100 / median:.2f} "
          f"torch {torch.__version__}")


if __name__ == "__main__":
    main()
