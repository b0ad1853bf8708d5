"""mpiasr's Conformer-CTC as a plain PyTorch module, with its feature pipeline.

Load a checkpoint folder written by `mpiasr train` and run it in PyTorch:

    import conformer_ctc
    model, frontend = conformer_ctc.load_checkpoint("runs/demo/checkpoints/step-00000500")
    features = frontend(samples)                    # 16 kHz mono float tensor -> [T, n_mels]
    logprobs, lengths = model(features[None], torch.tensor([len(features)]))

Python packages: torch and numpy (Debian's python3-torch, python3-numpy) and,
to load a checkpoint, PyYAML (python3-yaml). Run with Debian's /usr/bin/python3:
a python3 earlier on PATH (e.g. pyenv's) may lack them. safetensors files are parsed here (8-byte
header length, JSON header, raw little-endian data), so the `safetensors`
package is not needed.

The model is the standard Conformer-CTC (Gulati et al. 2020), as mpiasr
builds it (model/*.h):
  subsampling  Conv2d(1, C, 3, stride 2) ReLU Conv2d(C, C, 3, stride 2) ReLU over
               [B, 1, T, n_mels], then Linear(C * F2 -> d) over (channel, bin) and
               output frames t >= L2 zeroed; L2 = ((L - 1) // 2 - 1) // 2
  block        x += 1/2 FFN(LN x); x += MHSA(LN x); x += Conv(LN x); x += 1/2 FFN(LN x); x = LN x
  FFN          Linear(d -> 4d) SiLU Linear(4d -> d)
  MHSA         fused qkv Linear(d -> 3d) as [q k v] x heads, rotary position
               embedding (rotate-half, base 10000) on q and k, softmax over keys
               s < L2 only, Linear(d -> d); written out, or with set_sdpa by
               torch.nn.functional.scaled_dot_product_attention
  Conv         Linear(d -> 2d) GLU, depthwise Conv1d(d, kernel K, "same") on
               frames t < L2 (others zeroed before and after), LN, SiLU, Linear(d -> d)
  head         Linear(d -> V), log-softmax; V includes the CTC blank (id 0)
Names in model.safetensors are PyTorch's (`encoder.layers.3.attn.qkv.weight`)
and load as they are, except `encoder.subsampling.out.weight`: mpiasr
computes channels-last, so its columns run over (bin, channel) where this
module's run over (channel, bin); load_checkpoint permutes them.

Features (io/fbank.h, io/cmvn.h), for features.kaldi = false:
  frames of 25 ms every 10 ms, centred (frame t covers samples
  t * 160 - 200 .. t * 160 + 199 at 16 kHz, reflected at the edges without
  repeating the edge sample), 1 + n // 160 frames; optional pre-emphasis; a
  periodic Hann (or povey / hamming) window; |rfft_512|^2; HTK mel filters
  (triangles linear in Hz, torchaudio.functional.melscale_fbanks(norm=None,
  mel_scale="htk")); log(max(energy, 1e-10)); then global CMVN
  (x - mean) / max(std, 1e-5) from the checkpoint's statistics, or the same
  with each utterance's own statistics.
"""

import collections
import contextlib
import json
import math
import pathlib
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# ----------------------------------------------------------------------------
# safetensors

_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
    "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_,
}


def read_safetensors(path):
    """The tensors (name -> torch.Tensor) and the metadata (dict) of a file."""
    data = pathlib.Path(path).read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        dtype = np.dtype(_DTYPES[entry["dtype"]]).newbyteorder("<")
        array = np.frombuffer(data, dtype=dtype, count=(end - begin) // dtype.itemsize,
                              offset=8 + length + begin)
        tensors[name] = torch.from_numpy(array.reshape(entry["shape"]).astype(dtype.newbyteorder("=")))
    return tensors, metadata


# ----------------------------------------------------------------------------
# Features


def _mel(hz):
    return 1127.0 * math.log(1.0 + hz / 700.0)


def _hz(mel):
    return 700.0 * (math.exp(mel / 1127.0) - 1.0)


class LogMelFrontend:
    """Audio samples -> normalized log-mel features, as mpiasr computes them
    for evaluation (no dither)."""

    def __init__(self, features_config, cmvn_stats=None, dtype=torch.float64):
        if features_config.get("kaldi", False):
            raise NotImplementedError("features.kaldi = true is not reproduced here")
        self.sample_rate = int(features_config["sample_rate"])
        self.n_mels = int(features_config["n_mels"])
        self.preemphasis = float(features_config.get("preemphasis", 0.0))
        self.cmvn = features_config.get("cmvn", "global")
        self.dtype = dtype
        self.frame_length = round(self.sample_rate * 0.025)
        self.frame_shift = round(self.sample_rate * 0.010)
        self.n_fft = 512
        length = self.frame_length
        step = 2 * math.pi / length  # periodic windows
        hann = [0.5 - 0.5 * math.cos(step * i) for i in range(length)]
        window = features_config.get("window", "hann")
        if window == "povey":
            values = [h ** 0.85 for h in hann]
        elif window == "hamming":
            values = [0.54 - 0.46 * math.cos(step * i) for i in range(length)]
        else:
            values = hann
        self.window = torch.tensor(np.array(values, dtype=np.float32), dtype=dtype)
        n_bins = self.n_fft // 2 + 1
        bin_hz = self.sample_rate / self.n_fft
        low, high = _mel(0.0), _mel(self.sample_rate / 2)
        step_mel = (high - low) / (self.n_mels + 1)
        filters = np.zeros((self.n_mels, n_bins))
        for m in range(self.n_mels):
            left, center, right = (_hz(low + (m + k) * step_mel) for k in range(3))
            for k in range(n_bins):
                hz = k * bin_hz
                filters[m, k] = max(0.0, min((hz - left) / (center - left),
                                             (right - hz) / (right - center)))
        self.filters = torch.tensor(filters.astype(np.float32), dtype=dtype)
        self.mean = self.inv_std = None
        if self.cmvn == "global":
            frames = cmvn_stats["frames"]
            mean = np.array(cmvn_stats["sum"]) / frames
            variance = np.maximum(0.0, np.array(cmvn_stats["sum_sq"]) / frames - mean * mean)
            self.mean = torch.tensor(mean.astype(np.float32), dtype=dtype)
            self.inv_std = torch.tensor((1.0 / np.maximum(np.sqrt(variance), 1e-5)).astype(np.float32),
                                        dtype=dtype)

    def log_mel(self, samples):
        """samples [n] at the model's rate -> [1 + n // shift, n_mels], before CMVN."""
        x = torch.as_tensor(samples).to(self.dtype)
        n = x.shape[0]
        frames = 1 + n // self.frame_shift
        start = torch.arange(frames) * self.frame_shift - self.n_fft // 2 + (self.n_fft - self.frame_length) // 2
        index = start[:, None] + torch.arange(self.frame_length)[None, :]
        if n > 1:  # reflect without repeating the edge: x[-1] = x[1], x[n] = x[n - 2]
            period = 2 * (n - 1)
            index = index.remainder(period)
            index = torch.where(index < n, index, period - index)
        else:
            index = torch.zeros_like(index)
        frame = x[index]
        if self.preemphasis:
            frame = torch.cat([frame[:, :1] * (1 - self.preemphasis),
                               frame[:, 1:] - self.preemphasis * frame[:, :-1]], dim=1)
        frame = frame * self.window
        power = torch.fft.rfft(frame, n=self.n_fft).abs() ** 2
        return torch.log(torch.clamp(power @ self.filters.T, min=1e-10))

    def __call__(self, samples):
        features = self.log_mel(samples)
        if self.cmvn == "global":
            features = (features - self.mean) * self.inv_std
        elif self.cmvn == "utterance":
            mean = features.mean(dim=0)
            std = torch.sqrt(torch.clamp((features ** 2).mean(dim=0) - mean ** 2, min=0.0))
            features = (features - mean) / torch.clamp(std, min=1e-5)
        return features


# ----------------------------------------------------------------------------
# Model


def subsampled_frames(lengths):
    l1 = torch.where(lengths >= 3, (lengths - 1) // 2, torch.zeros_like(lengths))
    return torch.where(l1 >= 3, (l1 - 1) // 2, torch.zeros_like(l1))


def _valid(lengths, frames):
    """[B, T] True at frames t < lengths[b]."""
    return torch.arange(frames, device=lengths.device)[None, :] < lengths[:, None]


class ConvSubsampling(nn.Module):
    def __init__(self, n_mels, channels, d_model):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, channels, 3, 2), nn.ReLU(),
                                  nn.Conv2d(channels, channels, 3, 2), nn.ReLU())
        bins = int(subsampled_frames(torch.tensor([n_mels]))[0])
        self.out = nn.Linear(channels * bins, d_model)

    def forward(self, features, lengths):
        x = self.conv(features.unsqueeze(1))  # [B, C, T2, F2]
        b, c, t, f = x.shape
        x = self.out(x.transpose(1, 2).reshape(b, t, c * f))
        out_lengths = subsampled_frames(lengths)
        return x * _valid(out_lengths, t).unsqueeze(-1).to(x.dtype), out_lengths


class FeedForward(nn.Module):
    def __init__(self, d_model, hidden, eps):
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.linear1 = nn.Linear(d_model, hidden)
        self.linear2 = nn.Linear(hidden, d_model)
        self.dropout = 0.0  # set_dropout

    def forward(self, x):
        hidden = F.dropout(F.silu(self.linear1(self.norm(x))), self.dropout, self.training)
        return x + 0.5 * F.dropout(self.linear2(hidden), self.dropout, self.training)


def rotary(x, positions_cos, positions_sin):
    """Rotate-half rotary embedding of x [B, H, T, Dh]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * positions_cos - x2 * positions_sin,
                      x2 * positions_cos + x1 * positions_sin], dim=-1)


class SelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, eps):
        super().__init__()
        self.n_heads = n_heads
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.dropout = 0.0  # set_dropout
        self.sdpa = False  # set_sdpa

    def forward(self, x, keys):
        """keys: [B, 1, 1, T], True for the frames each utterance attends to,
        or None when every utterance has all T frames."""
        b, t, d = x.shape
        h, dh = self.n_heads, d // self.n_heads
        qkv = self.qkv(self.norm(x)).view(b, t, 3, h, dh).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # [B, H, T, Dh]
        # Angles pos * 10000^(-2i / Dh) in double, as mpiasr builds its tables.
        inv = 10000.0 ** (-2.0 * torch.arange(dh // 2, dtype=torch.float64, device=x.device) / dh)
        angles = torch.arange(t, dtype=torch.float64, device=x.device)[:, None] * inv[None, :]
        cos, sin = torch.cos(angles).to(q.dtype), torch.sin(angles).to(q.dtype)
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        if self.sdpa:
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=keys)
        else:
            scores = q @ k.transpose(-1, -2) * (1.0 / math.sqrt(dh))
            if keys is not None:
                scores = scores.masked_fill(~keys, float("-inf"))
            context = torch.softmax(scores, dim=-1) @ v
        context = context.transpose(1, 2).reshape(b, t, d)
        return x + F.dropout(self.out(context), self.dropout, self.training)


class ConvModule(nn.Module):
    def __init__(self, d_model, kernel, eps):
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.pointwise1 = nn.Linear(d_model, 2 * d_model)
        self.depthwise = nn.Conv1d(d_model, d_model, kernel, padding=(kernel - 1) // 2,
                                   groups=d_model)
        self.conv_norm = nn.LayerNorm(d_model, eps=eps)
        self.pointwise2 = nn.Linear(d_model, d_model)
        self.dropout = 0.0  # set_dropout

    def forward(self, x, lengths):
        valid = _valid(lengths, x.shape[1]).unsqueeze(-1).to(x.dtype)
        g = F.glu(self.pointwise1(self.norm(x)), dim=-1) * valid
        c = self.depthwise(g.transpose(1, 2)).transpose(1, 2) * valid
        return x + F.dropout(self.pointwise2(F.silu(self.conv_norm(c))), self.dropout,
                             self.training)


class ConformerBlock(nn.Module):
    def __init__(self, d_model, n_heads, ff_mult, kernel, eps):
        super().__init__()
        self.ff1 = FeedForward(d_model, ff_mult * d_model, eps)
        self.attn = SelfAttention(d_model, n_heads, eps)
        self.conv = ConvModule(d_model, kernel, eps)
        self.ff2 = FeedForward(d_model, ff_mult * d_model, eps)
        self.norm_out = nn.LayerNorm(d_model, eps=eps)

    def forward(self, x, lengths, keys):
        x = self.ff1(x)
        x = self.attn(x, keys)
        x = self.conv(x, lengths)
        x = self.ff2(x)
        return self.norm_out(x)


class Encoder(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.subsampling = ConvSubsampling(a["n_mels"], a["subsampling_channels"], a["d_model"])
        self.layers = nn.ModuleList(
            ConformerBlock(a["d_model"], a["n_heads"], a["ff_mult"], a["conv_kernel"],
                           a["layernorm_eps"]) for _ in range(a["n_layers"]))

    def forward(self, features, lengths, padded):
        x, lengths = self.subsampling(features, lengths)
        keys = _valid(lengths, x.shape[1])[:, None, None, :] if padded else None
        for layer in self.layers:
            x = layer(x, lengths, keys)
        return x, lengths


class ConformerCTC(nn.Module):
    """features [B, T, n_mels] (zero-padded) and lengths [B] -> log-probs
    [B, T2, V] and output lengths [B]; frames t >= the output length are padding.
    padded=False says that every utterance has all T frames, so that attention
    needs no mask of the keys (the fused kernels of set_sdpa run without one)."""

    def __init__(self, architecture):
        super().__init__()
        self.architecture = dict(architecture)
        self.encoder = Encoder(architecture)
        self.ctc_head = nn.Linear(architecture["d_model"], architecture["vocab_size"])

    def forward(self, features, lengths, padded=True):
        x, out_lengths = self.encoder(features, lengths, padded)
        return torch.log_softmax(self.ctc_head(x), dim=-1), out_lengths


def set_dropout(model, p):
    """Dropout with probability p where mpiasr applies it in training: after the
    feed-forward activation and on the feed-forward output, on the attention
    output projection and on the convolution module's output (each branch
    before its residual sum). Active in model.train() only; 0 (the default of
    every module) turns it off."""
    for block in model.encoder.layers:
        for module in (block.ff1, block.attn, block.conv, block.ff2):
            module.dropout = p
    return model


def set_sdpa(model, on=True):
    """Attention by torch.nn.functional.scaled_dot_product_attention (PyTorch
    2.0 and later; fused kernels on a GPU) instead of written out: the same
    function of q, k, v and the key mask."""
    for block in model.encoder.layers:
        block.attn.sdpa = on
    return model


# ----------------------------------------------------------------------------
# Training

# features [B, T, n_mels], lengths [B] and targets [B, S] on the model's device;
# output_lengths (subsampled_frames of lengths) and target_lengths as lists of
# ints, which the loss reads without waiting for the device.
Batch = collections.namedtuple("Batch", "features lengths targets output_lengths target_lengths")


def random_batch(utterances, frames, tokens, n_mels, vocab_size, device="cpu"):
    """The benchmarks' batch: utterances of `frames` frames of N(0, 1)
    features, each with `tokens` random targets in 1 .. vocab_size - 1."""
    features = torch.randn(utterances, frames, n_mels, device=device)
    lengths = torch.full((utterances,), frames, dtype=torch.long, device=device)
    targets = torch.randint(1, vocab_size, (utterances, tokens), device=device)
    output_frames = int(subsampled_frames(torch.tensor([frames]))[0])
    return Batch(features, lengths, targets, [output_frames] * utterances, [tokens] * utterances)


def training_step(model, optimizer, batch, clip_norm, autocast_dtype=None):
    """One optimizer step as mpiasr's trainer takes it on one batch: forward
    (under autocast to autocast_dtype when given), CTC summed over the batch
    and divided by its target tokens (impossible alignments zeroed), backward,
    the global gradient norm clipped to clip_norm, the optimizer's step.
    Returns the loss (a tensor on the device, not waited for)."""
    device = batch.features.device
    autocast = (torch.autocast(device.type, dtype=autocast_dtype) if autocast_dtype
                else contextlib.nullcontext())
    frames = int(subsampled_frames(torch.tensor([batch.features.shape[1]]))[0])
    optimizer.zero_grad(set_to_none=False)
    with autocast:
        logprobs, _ = model(batch.features, batch.lengths, min(batch.output_lengths) < frames)
    loss = F.ctc_loss(logprobs.float().transpose(0, 1), batch.targets, batch.output_lengths,
                      batch.target_lengths, reduction="sum", zero_infinity=True) / sum(batch.target_lengths)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    return loss


# ----------------------------------------------------------------------------
# Loading a checkpoint


def load_model(model_path, n_heads=None, dtype=torch.float64):
    """A ConformerCTC holding the weights of an mpiasr model.safetensors. The
    architecture comes from the file's "conformer" metadata; n_heads is needed
    only for files without it."""
    tensors, metadata = read_safetensors(model_path)
    if "conformer" in metadata:
        architecture = json.loads(metadata["conformer"])
    else:
        if n_heads is None:
            raise ValueError(f"{model_path} has no 'conformer' metadata (written before mpiasr "
                             "recorded the architecture): give the number of attention heads")
        conv0 = tensors["encoder.subsampling.conv.0.weight"]
        layers = {int(name.split(".")[2]) for name in tensors if name.startswith("encoder.layers.")}
        d_model = tensors["ctc_head.weight"].shape[1]
        channels = conv0.shape[0]
        bins = tensors["encoder.subsampling.out.weight"].shape[1] // channels
        architecture = {
            "n_mels": next(m for m in range(7, 10000) if int(subsampled_frames(torch.tensor([m]))[0]) == bins),
            "d_model": d_model, "n_layers": len(layers), "n_heads": n_heads,
            "ff_mult": tensors["encoder.layers.0.ff1.linear1.weight"].shape[0] // d_model,
            "conv_kernel": tensors["encoder.layers.0.conv.depthwise.weight"].shape[2],
            "subsampling_channels": channels,
            "vocab_size": tensors["ctc_head.weight"].shape[0], "layernorm_eps": 1e-5,
        }
    model = ConformerCTC(architecture)
    # mpiasr's subsampling output weight has columns (bin, channel); ours (channel, bin).
    out = tensors["encoder.subsampling.out.weight"]
    channels = architecture["subsampling_channels"]
    tensors["encoder.subsampling.out.weight"] = (
        out.view(out.shape[0], -1, channels).permute(0, 2, 1).reshape(out.shape[0], -1))
    model.load_state_dict(tensors, strict=True)
    return model.to(dtype).eval()


def load_checkpoint(checkpoint_dir, dtype=torch.float64, n_heads=None):
    """The model and the feature frontend of an mpiasr checkpoint folder
    (a step-NNNNNNNN folder with model.safetensors, config.yaml, state.json).
    n_heads: for model files without the "conformer" metadata (written before
    mpiasr recorded it) whose config.yaml sets no model.n_heads."""
    import yaml  # only here: the model and training need no PyYAML

    folder = pathlib.Path(checkpoint_dir)
    config = yaml.safe_load((folder / "config.yaml").read_text())
    state = json.loads((folder / "state.json").read_text())
    stats = None
    if state.get("cmvn_file"):
        stats = json.loads((folder / state["cmvn_file"]).read_text())
    model = load_model(folder / "model.safetensors", config["model"].get("n_heads") or n_heads, dtype)
    return model, LogMelFrontend(config["features"], stats, dtype)
