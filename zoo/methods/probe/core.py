"""PROBE on the digits toy: real vs generated 8x8 digits, a frozen timm detector as critic, a LoRA on the
shared digits DiT steered into hard fakes, a boundary-sample buffer, detector fine-tuning.

Paper: Cao et al., "Where Detectors Fail: Probing Generative Space for Generalizable AI-Generated Image
Detection", ICML 2026 (code, evaluation only: https://github.com/Amamiya-C/PROBE-AIGI-Detection).

* **Balanced accuracy** (the paper's metric, bAcc): ``(TPR + TNR) / 2`` with fake = positive,
  :func:`balanced_accuracy`.
* **Stage 1** (paper fig. 2, "generative-space probing"): freeze the detector D; attach LoRA Δφ to the
  generator's denoiser and train only Δφ through the sampling chain ``X_0 = Denoise(X_T, c; φ + Δφ)``
  on ``L_probe + λ L_prec``. **The paper does not publish either loss**; the stand-ins used here are the
  ones the method note labels [assumption] (``/work/shared/methods/probe.md`` §4.1):

  - ``L_probe = CE(D(X_0), real)`` = ``-log softmax(D(X_0))_real`` (push the "fake" score down);
  - ``L_prec = mean ||G_{φ+Δφ}(X_T, c) - G_φ(X_T, c)||²`` (same X_T, c and sampler; pixel MSE).

  Every ``buffer_every`` steps a fresh batch (new X_T, c) is drawn from the current LoRA generator and
  appended to the **boundary-induced fake-sample buffer** (the intermediate samples along the LoRA
  trajectory), all labelled fake. With ``buffer_band = (lo, hi)`` only the snapshot samples whose frozen-detector
  P(fake) lies in ``[lo, hi]`` are kept (:func:`band_mask`), the boundary samples proper (issue 39; the paper's
  filter, if any, is unpublished).
* **Stage 2**: fine-tune (a copy of) D on real images + the original fakes + the buffer with the
  cross-entropy detection loss; class-balanced minibatches.

Generators ("seen" = the detector's training fakes; the others are held out from detector training):
the shared DiT under other samplers / step counts / guidance ("differently sampled") and the
f-dpmsolver digits UNet ("differently trained": another architecture, unconditional, trained separately).
"""
from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
from torch.nn import functional as F

from zoo.common.digits import NUM_CLASSES, digits_split, sample_digits
from zoo.common.lora import inject_lora, lora_parameters, lora_scales
from zoo.common.scheduler_loop import run_scheduler_loop

__all__ = [
    "REAL", "FAKE", "build_detector", "GENERATORS", "SEEN", "UNSEEN", "balanced_accuracy", "detector_bacc", "predict", "generate", "seen_train_fakes",
    "train_detector", "Stage1Run", "probe_stage1", "band_mask", "finetune_detector", "LORA_TARGETS", "DETECTOR_ARCH", "EVAL_SEED", "TRAIN_FAKES_SEED",
]

REAL, FAKE = 0, 1
#: the detector: a timm ``test_resnet`` with one input channel and two classes (real, fake)
DETECTOR_ARCH: dict[str, Any] = {"model_name": "test_resnet", "in_chans": 1, "num_classes": 2}
#: the LoRA targets on the DiT: the attention projections and the feed-forward layers of both blocks
LORA_TARGETS = ("transformer_blocks.*.attn1.to_q", "transformer_blocks.*.attn1.to_k", "transformer_blocks.*.attn1.to_v",
                "transformer_blocks.*.attn1.to_out.0", "transformer_blocks.*.ff.net.0.proj", "transformer_blocks.*.ff.net.2")
EVAL_SEED = 7  # the held-out evaluation fakes
TRAIN_FAKES_SEED = 100  # the detector's training fakes (seen generator on the train split's labels)


@dataclass(frozen=True)
class Generator:
    """One fake-image source: ``model`` role (``dit`` class-conditional, ``unet`` unconditional), the
    diffusers scheduler, its step count and the classifier-free-guidance scale."""

    model: str
    scheduler: str
    steps: int
    guidance: float = 1.0
    note: str = ""


GENERATORS: dict[str, Generator] = {
    "dit-ddim10": Generator("dit", "ddim", 10, note="seen: the detector's training fakes and the stage-1 sampler"),
    "dit-ddim4": Generator("dit", "ddim", 4, note="same DiT, 4 DDIM steps"),
    "dit-ddim50": Generator("dit", "ddim", 50, note="same DiT, 50 DDIM steps"),
    "dit-ddpm50": Generator("dit", "ddpm", 50, note="same DiT, ancestral DDPM sampler, 50 steps"),
    "dit-dpmsolver10": Generator("dit", "dpmsolver++", 10, note="same DiT, DPM-Solver++ (2M), 10 steps"),
    "dit-cfg3": Generator("dit", "ddim", 10, 3.0, note="same DiT, DDIM-10 with classifier-free guidance 3"),
    "unet-ddim20": Generator("unet", "ddim", 20, note="differently trained: the f-dpmsolver digits UNet (unconditional), DDIM-20"),
}
SEEN = "dit-ddim10"
UNSEEN = tuple(k for k in GENERATORS if k != SEEN)


def build_detector() -> Any:
    """The detector architecture (random init): ``timm.create_model(**DETECTOR_ARCH)`` in eval mode (the spec's
    ``detector`` role is the same timm architecture with the shipped weights, made by :func:`~.train.train_shipped_detector`)."""
    import timm

    arch = dict(DETECTOR_ARCH)
    return timm.create_model(arch.pop("model_name"), pretrained=False, **arch).eval()


# ----------------------------------------------------------------------------- balanced accuracy
def balanced_accuracy(pred: torch.Tensor, label: torch.Tensor) -> float:
    """``(TPR + TNR) / 2`` for binary ``pred`` / ``label`` (1 = fake = positive, 0 = real); the mean of
    the per-class recalls (Brodersen et al. 2010). Both classes must be present in ``label``."""
    pred = torch.as_tensor(pred).reshape(-1).long()
    label = torch.as_tensor(label).reshape(-1).long()
    if pred.shape != label.shape:
        raise ValueError(f"pred has {pred.numel()} entries, label {label.numel()}")
    pos, neg = label == FAKE, label == REAL
    if not bool(pos.any()) or not bool(neg.any()):
        raise ValueError("balanced accuracy needs both classes in label")
    tpr = (pred[pos] == FAKE).double().mean()
    tnr = (pred[neg] == REAL).double().mean()
    return float((tpr + tnr) / 2)


@torch.no_grad()
def predict(detector: Any, images: torch.Tensor, chunk: int = 512) -> torch.Tensor:
    """Hard labels (argmax of the two logits) of ``detector`` in eval mode (no state is changed)."""
    was = detector.training
    detector.eval()
    out = torch.cat([detector(images[i:i + chunk]).argmax(1) for i in range(0, images.shape[0], chunk)])
    detector.train(was)
    return out


def detector_bacc(detector: Any, real: torch.Tensor, fake: torch.Tensor) -> float:
    """Balanced accuracy of ``detector`` on ``real`` (label 0) and ``fake`` (label 1) images."""
    pred = torch.cat([predict(detector, real), predict(detector, fake)])
    label = torch.cat([torch.full((real.shape[0],), REAL), torch.full((fake.shape[0],), FAKE)])
    return balanced_accuracy(pred, label)


# ----------------------------------------------------------------------------- fake images
def _dtype(model: Any) -> torch.dtype:
    return next(model.parameters()).dtype


def generate(models: Any, name: str, labels: torch.Tensor, seed: int, with_grad: bool = False, noise: torch.Tensor | None = None) -> torch.Tensor:
    """Fakes ``(B, 1, 8, 8)`` of generator ``name`` (:data:`GENERATORS`) for digit ``labels`` (ignored by
    the unconditional UNet), seeded: ``models`` maps role names (``dit``, ``unet``) to models."""
    gen = GENERATORS[name]
    model = models[gen.model]
    labels = torch.as_tensor(labels, dtype=torch.int64).reshape(-1)
    if gen.model == "dit":
        return sample_digits(model, labels, gen.steps, gen.scheduler, seed, guidance_scale=gen.guidance, noise=noise, with_grad=with_grad)
    from zoo.common.digits import make_scheduler

    if noise is None:
        noise = torch.randn((labels.shape[0], 1, 8, 8), generator=torch.Generator().manual_seed(int(seed)))
    return run_scheduler_loop(make_scheduler(gen.scheduler), model, noise.to(_dtype(model)), gen.steps,
                              generator=torch.Generator().manual_seed(int(seed) + 1), with_grad=with_grad)


def seen_train_fakes(dit: Any, n: int | None = None) -> torch.Tensor:
    """The detector's training fakes: the seen generator on the first ``n`` (default all 1,437) train-split
    labels, seed :data:`TRAIN_FAKES_SEED`."""
    y = digits_split().y_train
    return generate({"dit": dit}, SEEN, y if n is None else y[:n], TRAIN_FAKES_SEED)


# ----------------------------------------------------------------------------- detector training
def _balanced_batch(real: torch.Tensor, fakes: Sequence[torch.Tensor], per_class: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``per_class`` real rows and ``per_class`` fake rows split evenly over the fake pools (drawn with
    replacement from ``g`` in this order: real indices, then each pool's indices)."""
    r = real[torch.randint(0, real.shape[0], (per_class,), generator=g)]
    k = len(fakes)
    sizes = [per_class // k + (1 if i < per_class % k else 0) for i in range(k)]
    f = torch.cat([pool[torch.randint(0, pool.shape[0], (n,), generator=g)] for pool, n in zip(fakes, sizes)])
    y = torch.cat([torch.full((per_class,), REAL), torch.full((per_class,), FAKE)])
    return torch.cat([r, f]), y


def train_detector(detector: Any, real: torch.Tensor, fakes: Sequence[torch.Tensor], steps: int, lr: float, seed: int, batch: int = 128,
                   weight_decay: float = 1e-4, progress: bool = False, desc: str = "detector") -> list[float]:
    """Train ``detector`` **in place** with cross-entropy on class-balanced minibatches (half real, half
    fake split evenly over ``fakes``), AdamW at constant ``lr``; BatchNorm in train mode while training,
    eval mode after. Returns the loss per step."""
    g = torch.Generator().manual_seed(seed)
    for p in detector.parameters():
        p.requires_grad_(True)
    opt = torch.optim.AdamW(detector.parameters(), lr=lr, weight_decay=weight_decay)
    detector.train()
    losses = []
    it: Any = range(steps)
    if progress:
        from zoo.common.training import progress as bar

        it = bar(it, desc=desc)
    for _ in it:
        x, y = _balanced_batch(real, fakes, batch // 2, g)
        loss = F.cross_entropy(detector(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    detector.eval()
    return losses


def finetune_detector(detector: Any, real: torch.Tensor, original_fakes: torch.Tensor, buffer: torch.Tensor | None, steps: int, lr: float,
                      seed: int, batch: int = 128, progress: bool = False) -> Any:
    """Stage 2: a fine-tuned **copy** of ``detector`` on real + original fakes (+ the buffer, as a second
    fake pool of equal weight, when given). ``detector`` itself is not changed."""
    d = copy.deepcopy(detector)
    pools = [original_fakes] if buffer is None or buffer.shape[0] == 0 else [original_fakes, buffer]
    train_detector(d, real, pools, steps, lr, seed, batch, progress=progress, desc="stage 2")
    return d


# ----------------------------------------------------------------------------- stage 1
@dataclass
class Stage1Run:
    """Trace of :func:`probe_stage1`: ``buffer`` ``(n, 1, 8, 8)`` (all fakes), ``buffer_labels`` (the
    digit classes they were drawn for), ``buffer_steps`` (the stage-1 step of each snapshot),
    ``buffer_fake_prob`` (the frozen detector's mean P(fake) on each whole snapshot, before any band selection),
    ``buffer_kept`` (how many of each snapshot's samples entered the buffer), ``buffer_sample_fake_prob`` (the
    frozen detector's P(fake) of every buffer sample, in buffer order), and per step ``l_probe`` / ``l_prec`` /
    ``fake_prob`` (mean P(fake) on the training batch; fewer than ``steps`` entries when a full ``buffer_size``
    stopped stage 1 early)."""

    buffer: torch.Tensor
    buffer_labels: torch.Tensor
    buffer_steps: list[int] = field(default_factory=list)
    buffer_fake_prob: list[float] = field(default_factory=list)
    buffer_kept: list[int] = field(default_factory=list)
    buffer_sample_fake_prob: torch.Tensor = field(default_factory=lambda: torch.empty(0))
    l_probe: list[float] = field(default_factory=list)
    l_prec: list[float] = field(default_factory=list)
    fake_prob: list[float] = field(default_factory=list)


def probe_losses(detector: Any, x: torch.Tensor, base: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The note's stand-ins (labelled [assumption]; the paper's forms are unpublished):
    ``L_probe = CE(D(x), real)``, ``L_prec = mean (x - base)²``. Returns (L_probe, L_prec, P(fake) per row)."""
    logits = detector(x)
    l_probe = F.cross_entropy(logits, torch.full((x.shape[0],), REAL))
    l_prec = ((x - base) ** 2).mean()
    return l_probe, l_prec, logits.softmax(1)[:, FAKE].detach()


def band_mask(fake_prob: torch.Tensor, band: tuple[float, float]) -> torch.Tensor:
    """Boolean mask of the samples whose P(fake) lies in the closed band ``[lo, hi]`` (the boundary band of the
    ``buffer_band`` buffer)."""
    lo, hi = band
    return (fake_prob >= lo) & (fake_prob <= hi)


def probe_stage1(dit: Any, detector: Any, steps: int, lambda_prec: float, lr: float, batch: int, buffer_every: int, rank: int, seed: int,
                 critic: bool = True, progress: bool = False, on_step: Callable[[int], None] | None = None,
                 buffer_band: tuple[float, float] | None = None, buffer_size: int | None = None, buffer_batch: int | None = None) -> Stage1Run:
    """Stage 1 on a private copy of ``dit`` (``dit`` is not changed): rank-``rank`` LoRA (B = 0 at start)
    on :data:`LORA_TARGETS`, Adam on the LoRA tensors only, the seen generator's sampler (DDIM-10)
    differentiated end to end, loss ``L_probe + λ L_prec`` (:func:`probe_losses`). ``detector`` is frozen
    (eval mode, no gradients to its weights; its state is bit-identical afterwards). ``critic=False``
    is the no-critic ablation: the same LoRA trained on ``L_prec`` against a random-direction target
    instead (see :func:`_random_target_loss`). Per step the draws from a generator seeded with ``seed``
    are: labels, X_T. Every ``buffer_every`` steps a fresh batch (labels, X_T from the same generator)
    is sampled without gradient and appended to the buffer.

    The buffer is the paper's "boundary-induced fake-sample buffer" (Cao et al., ICML 2026, fig. 2, stage 1: the
    intermediate samples along the LoRA trajectory; the method note ``/work/shared/methods/probe.md`` §4.1 step 5;
    no arXiv id, section or equation number is known here, and the paper's snapshot schedule and any score filter
    are unpublished). ``buffer_band = (lo, hi)``: keep only the snapshot samples whose frozen-detector P(fake)
    (eval mode, the same critic) lies in ``[lo, hi]`` (:func:`band_mask`), per sample; ``buffer_size``: keep at
    most that many samples (the first in trajectory order) and stop stage 1 once the buffer holds them;
    ``buffer_batch``: the snapshot size (default ``batch``; a band keeps only a few of each snapshot, the detector's
    P(fake) being nearly two-valued per sample). All ``None`` (the default) is the unfiltered buffer, unchanged bit
    for bit."""
    g_model = copy.deepcopy(dit)
    torch.manual_seed(seed)  # LoRA A init (Kaiming-uniform) uses the global RNG
    inject_lora(g_model, LORA_TARGETS, rank=rank)
    params = lora_parameters(g_model)
    opt = torch.optim.Adam(params, lr=lr)
    gen = GENERATORS[SEEN]
    g = torch.Generator().manual_seed(seed)
    was_training = detector.training
    detector.eval()
    req = [p.requires_grad for p in detector.parameters()]
    for p in detector.parameters():
        p.requires_grad_(False)
    bufs, buf_labels, probs = [], [], []
    run = Stage1Run(torch.empty(0, 1, 8, 8), torch.empty(0, dtype=torch.int64))
    it: Any = range(steps)
    if progress:
        from zoo.common.training import progress as bar

        it = bar(it, desc=f"stage 1 (λ={lambda_prec:g})")
    sample = lambda y, x_T, s, grad: sample_digits(g_model, y, gen.steps, gen.scheduler, s, noise=x_T, with_grad=grad)  # noqa: E731
    try:
        for step in it:
            y = torch.randint(0, NUM_CLASSES, (batch,), generator=g)
            x_T = torch.randn((batch, 1, 8, 8), generator=g)
            with lora_scales(g_model, {"default": 0.0}):
                base = sample(y, x_T, seed, False)
            with lora_scales(g_model, {"default": 1.0}):
                x = sample(y, x_T, seed, True)
            if critic:
                l_probe, l_prec, pf = probe_losses(detector, x, base)
                loss = l_probe + lambda_prec * l_prec
            else:
                l_probe, l_prec, pf = probe_losses(detector, x.detach(), base)
                loss = _random_target_loss(x, base, seed) + lambda_prec * ((x - base) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            run.l_probe.append(float(l_probe.detach()))
            run.l_prec.append(float(l_prec.detach()))
            run.fake_prob.append(float(pf.mean()))
            if (step + 1) % buffer_every == 0:
                nb = batch if buffer_batch is None else buffer_batch
                yb = torch.randint(0, NUM_CLASSES, (nb,), generator=g)
                xb_T = torch.randn((nb, 1, 8, 8), generator=g)
                with lora_scales(g_model, {"default": 1.0}), torch.no_grad():
                    xb = sample(yb, xb_T, seed + step + 1, False)
                    pfb = detector(xb).softmax(1)[:, FAKE]
                run.buffer_steps.append(step + 1)
                run.buffer_fake_prob.append(float(pfb.mean()))
                keep = torch.ones_like(pfb, dtype=torch.bool) if buffer_band is None else band_mask(pfb, buffer_band)
                if buffer_size is not None:
                    room = buffer_size - sum(run.buffer_kept)
                    keep &= keep.cumsum(0) <= room
                bufs.append(xb[keep])
                buf_labels.append(yb[keep])
                probs.append(pfb[keep])
                run.buffer_kept.append(int(keep.sum()))
            if on_step is not None:
                on_step(step)
            if buffer_size is not None and sum(run.buffer_kept) >= buffer_size:
                break
    finally:
        detector.train(was_training)
        for p, r in zip(detector.parameters(), req):
            p.requires_grad_(r)
    if bufs:
        run.buffer, run.buffer_labels, run.buffer_sample_fake_prob = torch.cat(bufs), torch.cat(buf_labels), torch.cat(probs)
    return run


def _random_target_loss(x: torch.Tensor, base: torch.Tensor, seed: int) -> torch.Tensor:
    """No-critic ablation: pull the samples toward ``base + 0.3 u`` with a fixed random unit-RMS
    direction ``u`` (seeded), a detector-blind perturbation of similar size to the critic's."""
    u = torch.randn(base.shape[1:], generator=torch.Generator().manual_seed(seed + 12345))
    u = u / u.pow(2).mean().sqrt()
    return ((x - (base.detach() + 0.3 * u)) ** 2).mean()


# ----------------------------------------------------------------------------- evaluation sets
@functools.lru_cache(maxsize=4)
def _eval_labels(n: int) -> torch.Tensor:
    """The first ``n`` test-split labels (the real images of the evaluation are the first ``n`` test digits)."""
    return digits_split().y_test[:n]


def eval_fakes(models: Any, names: Sequence[str], n: int, seed: int = EVAL_SEED) -> dict[str, torch.Tensor]:
    """``n`` held-out fakes per generator (labels = the first ``n`` test labels, seed ``seed``)."""
    y = _eval_labels(n)
    return {name: generate(models, name, y, seed) for name in names}
