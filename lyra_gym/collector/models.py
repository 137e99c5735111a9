"""Benchmark models: plain-PyTorch stand-ins for the seven profile keys.

Every architecture here is written in this file from ``torch.nn`` building
blocks (no downloads, no torchvision, no pretrained weights): the collector
only needs the *cost* of a training step, so weights start random and the data
is synthetic. Each model has a full size (what the GPU collector measures)
and a ``tiny=True`` size that runs a step on a CPU in milliseconds (tests).

=============  ==========================================  ===============  ======================
key            architecture (full size)                    sample unit      why this unit
=============  ==========================================  ===============  ======================
resnet18       ResNet-18, CIFAR stem, 32x32 input, 10 cls  images           Pollux ``cifar10``, Gavel ResNet-18
resnet50       ResNet-50 (bottleneck), 224x224, 1000 cls   images           ImageNet ResNet-50
bert           BERT-large encoder, seq 128, MLM head       sequences        BERT-large pretraining, seq 128
transformer    GPT-style decoder LM, 12 x d1024, seq 512   tokens           Transformer-big is quoted in tokens/s
deepspeech2    conv front end + 5 bi-LSTM x 800, CTC loss  tokens (frames)  recurrent time steps, like GNMT tokens
ncf            NeuMF (GMF + MLP 256-256-128-64), ML-20M    samples          user-item pairs
yolov3         Darknet-style backbone, 2 YOLO heads, 416   images           VOC detection
=============  ==========================================  ===============  ======================

The sample units are chosen to match the units of the shipped built-in
profile (``tools/derive_builtin_profiles.py``: images for the CNNs, sequences
for BERT, tokens for Transformer-big and for GNMT, which stands in for
DeepSpeech2 there), so a measured GPU type can be merged into that file. A
model's ``units_per_item`` converts the benchmark's batch (items: images,
sequences, utterances, pairs) into sample units; e.g. one ``transformer``
item is one sequence of 512 tokens.

Sizes are assumptions where the source model has variants: BERT-large (as
the built-in profile's DeepLearningExamples figure), a 12-layer d=1024
decoder (about the compute per token of Transformer-big's 6+6 layers), and a
smaller Darknet than YOLOv3's Darknet-53 (a "small YOLO-style detector").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["BenchModel", "ModelSpec", "MODEL_SPECS", "build_model", "model_keys", "resolve_models"]


class BenchModel(nn.Module):
    """A model the collector can time: it makes its own synthetic batch and loss.

    Subclasses set ``sample_unit`` (what one profile sample is) and
    ``units_per_item`` (sample units in one batch item), and implement
    :meth:`synthetic_batch`, :meth:`loss` and :meth:`infer`.
    """

    sample_unit: str = "samples"
    units_per_item: int = 1

    def synthetic_batch(self, batch: int, device: torch.device, generator: torch.Generator) -> tuple[Tensor, ...]:
        """Random inputs and targets for ``batch`` items, already on ``device``."""
        raise NotImplementedError

    def loss(self, batch: tuple[Tensor, ...]) -> Tensor:
        """Scalar training loss of one batch (forward pass included)."""
        raise NotImplementedError

    def infer(self, batch: tuple[Tensor, ...]) -> Tensor:
        """Forward pass only, as served (the outputs, no loss)."""
        raise NotImplementedError


def _randint(high: int, shape: tuple[int, ...], device: torch.device, g: torch.Generator) -> Tensor:
    # Draw on the CPU with the seeded generator, then move: same data on every device.
    return torch.randint(0, high, shape, generator=g).to(device)


def _randn(shape: tuple[int, ...], device: torch.device, g: torch.Generator) -> Tensor:
    return torch.randn(shape, generator=g).to(device)


# --------------------------------------------------------------------------- ResNets


class _BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.short = None
        if stride != 1 or cin != width:
            self.short = nn.Sequential(nn.Conv2d(cin, width, 1, stride, bias=False), nn.BatchNorm2d(width))

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.short is None else self.short(x)))


class _Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)  # stride on the 3x3 (ResNet v1.5)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (x if self.short is None else self.short(x)))


class ResNet(BenchModel):
    """ResNet (He et al., 2016) for image classification.

    :param block: ``"basic"`` (ResNet-18/34) or ``"bottleneck"`` (ResNet-50+).
    :param layers: blocks per stage, e.g. ``(2, 2, 2, 2)``.
    :param width: channels of the first stage (64 in the paper).
    :param classes: output classes.
    :param image: input side in pixels (square RGB images).
    :param cifar_stem: 3x3 stride-1 stem without max-pool (CIFAR); else 7x7/2 + max-pool.
    """

    sample_unit = "images"

    def __init__(self, block: str, layers: tuple[int, ...], width: int, classes: int, image: int,
                 cifar_stem: bool) -> None:
        super().__init__()
        cls = _BasicBlock if block == "basic" else _Bottleneck
        self.image, self.classes = image, classes
        if cifar_stem:
            self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        else:
            self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
        stages, cin = [], width
        for i, n in enumerate(layers):
            w = width * 2 ** i
            for j in range(n):
                stages.append(cls(cin, w, 2 if (i > 0 and j == 0) else 1))
                cin = w * cls.expansion
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    def synthetic_batch(self, batch, device, generator):
        return (_randn((batch, 3, self.image, self.image), device, generator),
                _randint(self.classes, (batch,), device, generator))

    def loss(self, batch):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def infer(self, batch):
        return self(batch[0])


# --------------------------------------------------------------------------- transformers


class _Block(nn.Module):
    """One transformer layer: multi-head self-attention and a GELU feed-forward.

    ``pre_norm`` = GPT-2 style (LayerNorm before each sub-layer), else BERT style
    (after). Attention uses ``F.scaled_dot_product_attention`` (flash/efficient
    kernels where the device has them).
    """

    def __init__(self, d: int, heads: int, ffn: int, causal: bool, pre_norm: bool, dropout: float = 0.1) -> None:
        super().__init__()
        self.heads, self.causal, self.pre_norm, self.dropout = heads, causal, pre_norm, dropout
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, ffn), nn.GELU(), nn.Linear(ffn, d))
        self.drop = nn.Dropout(dropout)

    def _attend(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal,
                                             dropout_p=self.dropout if self.training else 0.0)
        return self.drop(self.proj(out.transpose(1, 2).reshape(b, t, d)))

    def forward(self, x: Tensor) -> Tensor:
        if self.pre_norm:
            x = x + self._attend(self.ln1(x))
            return x + self.drop(self.ff(self.ln2(x)))
        x = self.ln1(x + self._attend(x))
        return self.ln2(x + self.drop(self.ff(x)))


class BertEncoder(BenchModel):
    """BERT-style bidirectional encoder with a masked-language-model head (Devlin et al., 2019).

    Synthetic batch: random token ids; 15 % of positions carry a random target
    token, the rest are ignored by the loss (as in MLM pretraining).
    """

    sample_unit = "sequences"

    def __init__(self, vocab: int, d: int, layers: int, heads: int, ffn: int, seq: int) -> None:
        super().__init__()
        self.vocab, self.seq = vocab, seq
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.typ = nn.Embedding(2, d)
        self.ln = nn.LayerNorm(d)
        self.blocks = nn.ModuleList(_Block(d, heads, ffn, causal=False, pre_norm=False) for _ in range(layers))
        self.head = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d))
        self.bias = nn.Parameter(torch.zeros(vocab))

    def forward(self, ids: Tensor) -> Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.ln(self.tok(ids) + self.pos(pos) + self.typ(torch.zeros_like(ids)))
        for block in self.blocks:
            x = block(x)
        return self.head(x) @ self.tok.weight.t() + self.bias  # decoder tied to the embedding

    def synthetic_batch(self, batch, device, generator):
        ids = _randint(self.vocab, (batch, self.seq), device, generator)
        labels = _randint(self.vocab, (batch, self.seq), device, generator)
        masked = torch.rand((batch, self.seq), generator=generator).to(device) < 0.15
        return ids, torch.where(masked, labels, torch.full_like(labels, -100))

    def loss(self, batch):
        ids, labels = batch
        return F.cross_entropy(self(ids).flatten(0, 1).float(), labels.flatten(), ignore_index=-100)

    def infer(self, batch):
        return self(batch[0])


class GptDecoder(BenchModel):
    """GPT-style causal decoder language model (pre-norm, tied embeddings). One item = one sequence."""

    sample_unit = "tokens"

    def __init__(self, vocab: int, d: int, layers: int, heads: int, ffn: int, seq: int) -> None:
        super().__init__()
        self.vocab, self.seq = vocab, seq
        self.units_per_item = seq
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(_Block(d, heads, ffn, causal=True, pre_norm=True) for _ in range(layers))
        self.ln = nn.LayerNorm(d)

    def forward(self, ids: Tensor) -> Tensor:
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.ln(x) @ self.tok.weight.t()

    def synthetic_batch(self, batch, device, generator):
        ids = _randint(self.vocab, (batch, self.seq + 1), device, generator)
        return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    def loss(self, batch):
        ids, targets = batch
        return F.cross_entropy(self(ids).flatten(0, 1).float(), targets.flatten())

    def infer(self, batch):
        return self(batch[0])


# --------------------------------------------------------------------------- speech


class SpeechLstm(BenchModel):
    """DeepSpeech2-style acoustic model (Amodei et al., 2016) with LSTM layers.

    Two 2-D convolutions over a (frequency x time) spectrogram (the second
    halves time), then stacked bidirectional LSTMs, a linear layer to
    characters, and CTC loss. One item = one utterance of ``frames`` input
    frames; its sample units are the recurrent time steps (``frames // 2``).
    """

    sample_unit = "tokens"

    def __init__(self, freq: int, frames: int, channels: int, hidden: int, layers: int, chars: int = 29,
                 target_len: int = 100) -> None:
        super().__init__()
        self.freq, self.frames, self.chars = freq, frames, chars
        self.steps = frames // 2
        self.units_per_item = self.steps
        self.target_len = min(target_len, self.steps // 2)
        self.conv = nn.Sequential(
            nn.Conv2d(1, channels, (41, 11), (2, 2), (20, 5), bias=False), nn.BatchNorm2d(channels), nn.Hardtanh(0, 20),
            nn.Conv2d(channels, channels, (21, 11), (2, 1), (10, 5), bias=False), nn.BatchNorm2d(channels),
            nn.Hardtanh(0, 20),
        )
        conv_freq = math.ceil(math.ceil(freq / 2) / 2)
        self.rnn = nn.LSTM(channels * conv_freq, hidden, num_layers=layers, bidirectional=True, batch_first=True)
        self.out = nn.Linear(2 * hidden, chars)

    def forward(self, spec: Tensor) -> Tensor:
        x = self.conv(spec.unsqueeze(1))  # (b, c, f', t')
        x = x.flatten(1, 2).transpose(1, 2)  # (b, t', c*f')
        x, _ = self.rnn(x)
        return self.out(x)  # (b, t', chars)

    def synthetic_batch(self, batch, device, generator):
        spec = _randn((batch, self.freq, self.frames), device, generator)
        targets = _randint(self.chars - 1, (batch, self.target_len), device, generator) + 1  # 0 = CTC blank
        return spec, targets

    def loss(self, batch):
        spec, targets = batch
        logp = self(spec).float().log_softmax(-1).transpose(0, 1)  # (t', b, chars)
        b = spec.shape[0]
        in_len = torch.full((b,), logp.shape[0], dtype=torch.long)
        tgt_len = torch.full((b,), targets.shape[1], dtype=torch.long)
        return F.ctc_loss(logp, targets, in_len, tgt_len, zero_infinity=True)

    def infer(self, batch):
        return self(batch[0])


# --------------------------------------------------------------------------- recommendation


class NeuMF(BenchModel):
    """Neural collaborative filtering, NeuMF variant (He et al., 2017): GMF + MLP towers, BCE loss."""

    sample_unit = "samples"

    def __init__(self, users: int, items: int, factors: int, mlp: tuple[int, ...]) -> None:
        super().__init__()
        self.users, self.items = users, items
        self.gmf_u, self.gmf_i = nn.Embedding(users, factors), nn.Embedding(items, factors)
        self.mlp_u, self.mlp_i = nn.Embedding(users, mlp[0] // 2), nn.Embedding(items, mlp[0] // 2)
        layers: list[nn.Module] = []
        for a, b in zip(mlp[:-1], mlp[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.mlp = nn.Sequential(*layers)
        self.out = nn.Linear(factors + mlp[-1], 1)

    def forward(self, user: Tensor, item: Tensor) -> Tensor:
        gmf = self.gmf_u(user) * self.gmf_i(item)
        mlp = self.mlp(torch.cat([self.mlp_u(user), self.mlp_i(item)], dim=-1))
        return self.out(torch.cat([gmf, mlp], dim=-1)).squeeze(-1)

    def synthetic_batch(self, batch, device, generator):
        return (_randint(self.users, (batch,), device, generator), _randint(self.items, (batch,), device, generator),
                _randint(2, (batch,), device, generator).float())

    def loss(self, batch):
        user, item, label = batch
        return F.binary_cross_entropy_with_logits(self(user, item).float(), label)

    def infer(self, batch):
        return self(batch[0], batch[1])


# --------------------------------------------------------------------------- detection


def _cbl(cin: int, cout: int, k: int, stride: int = 1) -> nn.Sequential:
    """Conv + BatchNorm + LeakyReLU(0.1), the Darknet unit."""
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout), nn.LeakyReLU(0.1))


class _DarkRes(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.body = nn.Sequential(_cbl(c, c // 2, 1), _cbl(c // 2, c, 3))

    def forward(self, x: Tensor) -> Tensor:
        return x + self.body(x)


class YoloDetector(BenchModel):
    """Small YOLOv3-style detector (Redmon & Farhadi, 2018): Darknet residual backbone,
    detections at strides 32 and 16 (3 anchors each), YOLO-style loss.

    Synthetic targets: a dense tensor per head; about 2 % of anchor cells hold
    an object. Loss = MSE on box offsets of object cells + BCE on objectness of
    all cells + BCE on class scores of object cells.
    """

    sample_unit = "images"

    def __init__(self, width: int, stages: tuple[int, ...], image: int, classes: int = 20, anchors: int = 3) -> None:
        super().__init__()
        self.image, self.classes, self.anchors = image, classes, anchors
        layers: list[nn.Module] = [_cbl(3, width, 3)]
        c = width
        self.route_at = len(stages) - 2  # output of this stage feeds the stride-16 head
        self.stages = nn.ModuleList()
        for n in stages:
            stage = [_cbl(c, 2 * c, 3, 2)] + [_DarkRes(2 * c) for _ in range(n)]
            c *= 2
            self.stages.append(nn.Sequential(*stage))
        self.stem = nn.Sequential(*layers)
        out = anchors * (5 + classes)
        self.neck32 = nn.Sequential(_cbl(c, c // 2, 1), _cbl(c // 2, c, 3), _cbl(c, c // 2, 1))
        self.head32 = nn.Sequential(_cbl(c // 2, c, 3), nn.Conv2d(c, out, 1))
        self.lateral = _cbl(c // 2, c // 4, 1)
        self.head16 = nn.Sequential(_cbl(c // 4 + c // 2, c // 2, 3), nn.Conv2d(c // 2, out, 1))

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        x = self.stem(x)
        route = x
        for i, stage in enumerate(self.stages):
            x = stage(x)
            if i == self.route_at:
                route = x
        n32 = self.neck32(x)
        up = F.interpolate(self.lateral(n32), scale_factor=2.0, mode="nearest")
        return self.head32(n32), self.head16(torch.cat([up, route], dim=1))

    def _target(self, batch: int, side: int, device: torch.device, g: torch.Generator) -> Tensor:
        t = torch.rand((batch, self.anchors, 5 + self.classes, side, side), generator=g)
        t[:, :, 4] = (t[:, :, 4] < 0.02).float()  # objectness
        t[:, :, 5:] = (t[:, :, 5:] < 1.0 / self.classes).float()
        return t.to(device)

    def synthetic_batch(self, batch, device, generator):
        side32 = math.ceil(self.image / 2 ** len(self.stages))
        return (_randn((batch, 3, self.image, self.image), device, generator),
                self._target(batch, side32, device, generator), self._target(batch, 2 * side32, device, generator))

    def loss(self, batch):
        images, *targets = batch
        total = images.new_zeros((), dtype=torch.float32)
        for pred, tgt in zip(self(images), targets):
            b, _, h, w = pred.shape
            p = pred.float().view(b, self.anchors, 5 + self.classes, h, w)
            obj = tgt[:, :, 4:5]
            total = total + (obj * (p[:, :, :4].sigmoid() - tgt[:, :, :4]) ** 2).sum() / b
            total = total + F.binary_cross_entropy_with_logits(p[:, :, 4], tgt[:, :, 4], reduction="sum") / b
            total = total + (obj * F.binary_cross_entropy_with_logits(p[:, :, 5:], tgt[:, :, 5:], reduction="none")).sum() / b
        return total

    def infer(self, batch):
        return self(batch[0])


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class ModelSpec:
    """How the collector builds and drives one profile key.

    :param key: profile model key.
    :param build: ``build(tiny)`` -> a :class:`BenchModel`.
    :param optimizer: ``"sgd"`` (momentum 0.9) or ``"adamw"``; what the model's
        reference training recipe uses.
    :param batches: default per-worker batches in items (full size); chosen
        to include the built-in profile's ``local_batch`` (in sample units) so
        a merge needs no extrapolation.
    :param tiny_batches: default batches in items at ``tiny=True``.
    :param description: one line for humans.
    """

    key: str
    build: Callable[[bool], BenchModel]
    optimizer: str
    batches: tuple[int, ...]
    tiny_batches: tuple[int, ...]
    description: str


MODEL_SPECS: dict[str, ModelSpec] = {s.key: s for s in (
    ModelSpec("resnet18", lambda tiny: ResNet("basic", (1, 1, 1, 1) if tiny else (2, 2, 2, 2), 8 if tiny else 64,
                                              10, 32, cifar_stem=True),
              "sgd", (64, 128), (2, 4), "ResNet-18 on 32x32 CIFAR-10-shaped images"),
    ModelSpec("resnet50", lambda tiny: ResNet("bottleneck", (1, 1, 1, 1) if tiny else (3, 4, 6, 3),
                                              4 if tiny else 64, 10 if tiny else 1000, 32 if tiny else 224,
                                              cifar_stem=False),
              "sgd", (128, 256), (2, 4), "ResNet-50 v1.5 on 224x224 ImageNet-shaped images"),
    ModelSpec("bert", lambda tiny: BertEncoder(*((256, 32, 2, 4, 64, 16) if tiny else (30522, 1024, 24, 16, 4096, 128))),
              "adamw", (32, 64), (2, 4), "BERT-large encoder, MLM, sequence length 128"),
    ModelSpec("transformer", lambda tiny: GptDecoder(*((256, 32, 2, 4, 64, 16) if tiny else (32000, 1024, 12, 16, 4096, 512))),
              "adamw", (5, 10), (2, 4), "GPT-style decoder LM, 12 layers, d=1024, 512-token sequences"),
    ModelSpec("deepspeech2", lambda tiny: SpeechLstm(*((16, 32, 4, 16, 1) if tiny else (161, 1024, 32, 800, 5))),
              "sgd", (8, 16), (2, 4), "DeepSpeech2-style conv + 5 bi-LSTM, CTC, 1,024-frame utterances"),
    ModelSpec("ncf", lambda tiny: NeuMF(*((100, 50, 8, (16, 8)) if tiny else (138_493, 26_744, 64, (256, 256, 128, 64)))),
              "adamw", (65_536, 131_072), (16, 32), "NeuMF on MovieLens-20M-sized embeddings"),
    ModelSpec("yolov3", lambda tiny: YoloDetector(*((4, (1, 1, 1), 32) if tiny else (32, (1, 2, 2, 2, 1), 416))),
              "sgd", (32, 64), (2, 4), "small YOLOv3-style detector, 416x416, 20 classes"),
)}


def model_keys() -> list[str]:
    """Every key the collector can benchmark, in a fixed order."""
    return list(MODEL_SPECS)


def resolve_models(text: str | list[str]) -> list[str]:
    """Model keys from ``"all"`` or a comma-separated list (order kept, duplicates dropped).

    :raises KeyError: naming the first unknown key and listing the known ones.
    """
    items = text.split(",") if isinstance(text, str) else list(text)
    keys: list[str] = []
    for raw in items:
        key = raw.strip()
        if not key:
            continue
        if key == "all":
            keys.extend(MODEL_SPECS)
            continue
        if key not in MODEL_SPECS:
            raise KeyError(f"unknown model key {key!r} (known: {', '.join(MODEL_SPECS)}, or 'all')")
        keys.append(key)
    if not keys:
        raise KeyError(f"no model keys given (known: {', '.join(MODEL_SPECS)}, or 'all')")
    return list(dict.fromkeys(keys))


def build_model(key: str, tiny: bool = False) -> BenchModel:
    """A fresh model for ``key`` (random weights, training mode)."""
    return MODEL_SPECS[resolve_models([key])[0]].build(tiny)
