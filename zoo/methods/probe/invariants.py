"""Named property checks for ``probe`` (run by the conformance harness under Hypothesis).

Each registered invariant calls a ``check_*`` function that takes the implementation under test as an
argument, so ``tests/methods/test_probe.py`` can feed it a plausible wrong implementation (the negative
control) and see it fail. Every check is exact (integer counts, bitwise tensors); none is statistical."""
from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.contract import invariant
from zoo.common.lora import inject_lora, lora_layers, lora_scales

from .core import FAKE, LORA_TARGETS, REAL, SEEN, GENERATORS, balanced_accuracy, probe_stage1

_SEEDS = st.integers(0, 2**31 - 1)
_FAST = settings(max_examples=25, deadline=None)
_SLOWISH = settings(max_examples=3, deadline=None)


def shipped(ctx: Any) -> tuple[Any, Any]:
    """The toy's DiT and detector roles (built once by the engine from the specs' declarations and shared; the
    checks below only read them, or work on copies)."""
    models = ctx.models("toy")
    return models["dit"], models["detector"]


def _labels(g: torch.Generator, n_real: int, n_fake: int) -> torch.Tensor:
    lab = torch.cat([torch.full((n_real,), REAL), torch.full((n_fake,), FAKE)])
    return lab[torch.randperm(lab.numel(), generator=g)]


# ----------------------------------------------------------------------------- balanced accuracy
def check_bacc_symmetry_and_constant(bacc: Callable[[torch.Tensor, torch.Tensor], float], seed: int) -> None:
    """On random predictions and imbalanced labels: bAcc ∈ [0, 1]; swapping the class names in both
    predictions and labels leaves it unchanged (symmetry); flipping only the predictions gives 1 − bAcc;
    a constant detector (all real, or all fake) scores exactly 0.5 whatever the class ratio."""
    g = torch.Generator().manual_seed(seed)
    n_real = int(torch.randint(1, 60, (1,), generator=g))
    n_fake = int(torch.randint(1, 60, (1,), generator=g))
    label = _labels(g, n_real, n_fake)
    pred = torch.randint(0, 2, label.shape, generator=g)
    v = bacc(pred, label)
    assert 0.0 <= v <= 1.0, v
    assert abs(bacc(1 - pred, 1 - label) - v) <= 1e-12, (bacc(1 - pred, 1 - label), v)
    assert abs(bacc(1 - pred, label) - (1 - v)) <= 1e-12, (bacc(1 - pred, label), v)
    for c in (REAL, FAKE):
        assert bacc(torch.full_like(label, c), label) == 0.5, (c, n_real, n_fake)


@invariant("balanced-accuracy-is-symmetric-and-half-for-constant-detectors")
@_FAST
@given(_SEEDS)
def bacc_symmetric_constant(seed: int) -> None:
    """bAcc = (TPR + TNR)/2 ∈ [0, 1] is symmetric in the class names, complements under flipped predictions,
    and equals 0.5 exactly for a constant detector at any class imbalance (plain accuracy would not)."""
    check_bacc_symmetry_and_constant(balanced_accuracy, seed)


def check_bacc_balanced_and_duplication(bacc: Callable[[torch.Tensor, torch.Tensor], float], seed: int) -> None:
    """On a balanced set bAcc equals plain accuracy; duplicating every row of one class (k times) leaves
    it unchanged (it averages per-class rates), and it equals the brute-force (TPR + TNR)/2 from counts."""
    g = torch.Generator().manual_seed(seed)
    n = int(torch.randint(1, 50, (1,), generator=g))
    label = _labels(g, n, n)
    pred = torch.randint(0, 2, label.shape, generator=g)
    acc = float((pred == label).double().mean())
    assert abs(bacc(pred, label) - acc) <= 1e-12, (bacc(pred, label), acc)
    k = int(torch.randint(2, 5, (1,), generator=g))
    cls = int(torch.randint(0, 2, (1,), generator=g))
    m = label == cls
    pred2 = torch.cat([pred, pred[m].repeat(k - 1)])
    label2 = torch.cat([label, label[m].repeat(k - 1)])
    assert abs(bacc(pred2, label2) - bacc(pred, label)) <= 1e-12, (bacc(pred2, label2), bacc(pred, label))
    tp = int(((pred2 == FAKE) & (label2 == FAKE)).sum())
    tn = int(((pred2 == REAL) & (label2 == REAL)).sum())
    ref = 0.5 * (tp / int((label2 == FAKE).sum()) + tn / int((label2 == REAL).sum()))
    assert abs(bacc(pred2, label2) - ref) <= 1e-12, (bacc(pred2, label2), ref)


@invariant("balanced-accuracy-equals-accuracy-on-balanced-sets-and-ignores-class-duplication")
@_FAST
@given(_SEEDS)
def bacc_balanced_duplication(seed: int) -> None:
    """bAcc equals accuracy on balanced sets, is invariant to duplicating one class, and matches counts."""
    check_bacc_balanced_and_duplication(balanced_accuracy, seed)


# ----------------------------------------------------------------------------- LoRA with B = 0
def check_zero_b_identity(inject: Callable[..., Any], seed: int, dit: Any, steps: int = 2) -> None:
    """A LoRA (rank from the seed, A random, B = 0) on :data:`LORA_TARGETS` of a copy of the shipped DiT,
    active at scale 1: the seen generator's samples (DDIM, ``steps`` steps, seeded) are bit-identical to
    the unadapted DiT's, and so is every module's output on a random input."""
    from zoo.common.digits import sample_digits

    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 10, (3,), generator=g)
    x_T = torch.randn((3, 1, 8, 8), generator=g)
    ref = sample_digits(dit, y, steps, GENERATORS[SEEN].scheduler, seed, noise=x_T)
    adapted = copy.deepcopy(dit)
    torch.manual_seed(seed)
    inject(adapted, LORA_TARGETS, rank=1 + seed % 8)
    assert any(True for _ in lora_layers(adapted)), "no LoRA layer was injected"
    with lora_scales(adapted, {"default": 1.0}):
        out = sample_digits(adapted, y, steps, GENERATORS[SEEN].scheduler, seed, noise=x_T)
    assert torch.equal(out, ref), f"max |Δ| {float((out - ref).abs().max()):.3g}"


@invariant("lora-with-zero-b-leaves-the-generator-bit-identical")
@_SLOWISH
@given(_SEEDS)
def zero_b_identity(ctx: Any, seed: int) -> None:
    """LoRA with B = 0 (its initialisation) leaves the generator's samples bit-identical (L_prec = 0 at step 0)."""
    check_zero_b_identity(inject_lora, seed, shipped(ctx)[0])


# ----------------------------------------------------------------------------- detector frozen in stage 1
def check_detector_frozen(stage1: Callable[..., Any], seed: int, dit: Any, det: Any) -> None:
    """Two stage-1 steps with the shipped detector as critic leave every tensor of its state dict (weights
    and BatchNorm running statistics) bit-identical, restore its mode and ``requires_grad`` flags, and do
    change the LoRA generator (the critic's gradient reached it: a no-op stage 1 would pass vacuously)."""
    det = copy.deepcopy(det)
    det.train()  # a caller in train mode: stage 1 must still not update BatchNorm statistics
    before = {k: v.clone() for k, v in det.state_dict().items()}
    flags = [p.requires_grad for p in det.parameters()]
    run = stage1(dit, det, steps=2, lambda_prec=1.0, lr=1e-2, batch=2, buffer_every=1, rank=2, seed=seed)
    for k, v in det.state_dict().items():
        assert torch.equal(v, before[k]), f"detector tensor {k} changed during stage 1"
    assert det.training, "stage 1 did not restore the detector's mode"
    assert [p.requires_grad for p in det.parameters()] == flags
    assert run.l_prec[-1] > 0, "the LoRA did not move the generator (stage 1 did nothing)"


@invariant("detector-frozen-bit-identical-during-stage-1")
@_SLOWISH
@given(_SEEDS)
def detector_frozen(ctx: Any, seed: int) -> None:
    """Stage 1 trains only the LoRA: the critic's weights and BatchNorm buffers stay bit-identical."""
    check_detector_frozen(probe_stage1, seed, *shipped(ctx))


# ----------------------------------------------------------------------------- buffer
def check_buffer(stage1: Callable[..., Any], seed: int, steps: int, every: int, batch: int, dit: Any, det: Any) -> None:
    """The buffer holds ``⌊steps / every⌋ · batch`` images of shape (1, 8, 8), finite, one snapshot at each
    multiple of ``every``, with one digit label each; the traces have one entry per step."""
    run = stage1(dit, det, steps=steps, lambda_prec=1.0, lr=1e-3, batch=batch, buffer_every=every, rank=2, seed=seed)
    n = steps // every
    assert tuple(run.buffer.shape) == (n * batch, 1, 8, 8), tuple(run.buffer.shape)
    assert run.buffer_labels.shape == (n * batch,) and bool(((run.buffer_labels >= 0) & (run.buffer_labels < 10)).all())
    assert run.buffer_steps == [every * (i + 1) for i in range(n)], run.buffer_steps
    assert len(run.buffer_fake_prob) == n and all(0.0 <= p <= 1.0 for p in run.buffer_fake_prob)
    assert bool(torch.isfinite(run.buffer).all())
    assert len(run.l_probe) == len(run.l_prec) == steps


@invariant("buffer-holds-only-fakes-with-the-lora-trajectory-shape")
@settings(max_examples=2, deadline=None)
@given(_SEEDS, st.integers(1, 3), st.integers(1, 3))
def buffer_shape(ctx: Any, seed: int, every: int, batch: int) -> None:
    """The boundary buffer gets one snapshot of ``batch`` fresh generator samples every ``every`` stage-1
    steps (labelled fake in stage 2: :func:`~.core.finetune_detector` puts it in the fake pool)."""
    check_buffer(probe_stage1, seed, 3, every, batch, *shipped(ctx))


# ----------------------------------------------------------------------------- boundary-band buffer
BAND_CHECK = (0.1, 0.99)  # wide enough that a few stage-1 steps of the shipped critic put samples both in and out of it


def check_band_buffer(stage1: Callable[..., Any], seed: int, dit: Any, det: Any, band: tuple[float, float] = BAND_CHECK) -> None:
    """Stage 1 with ``buffer_band``: every buffer sample's P(fake) under the frozen detector (recomputed here, eval
    mode) lies in the band and equals the recorded ``buffer_sample_fake_prob``; the per-snapshot counts add up to the
    buffer; and the band did something (some samples kept, some left out: a filter that keeps all, or none, fails)."""
    lo, hi = band
    steps, nb = 3, 16
    run = stage1(dit, det, steps=steps, lambda_prec=1.0, lr=1e-3, batch=2, buffer_every=1, rank=2, seed=seed, buffer_band=band,
                 buffer_batch=nb)
    n = run.buffer.shape[0]
    assert run.buffer_labels.shape == (n,) and run.buffer_sample_fake_prob.shape == (n,)
    assert sum(run.buffer_kept) == n and len(run.buffer_kept) == len(run.buffer_steps) == steps, (run.buffer_kept, n)
    assert 0 < n < steps * nb, f"the band kept {n} of {steps * nb} samples: it did not select"
    with torch.no_grad():
        pf = torch.softmax(copy.deepcopy(det).eval()(run.buffer), 1)[:, FAKE]
    tol = 1e-5  # a subset batch may round the convolutions differently
    assert bool(((pf >= lo - tol) & (pf <= hi + tol)).all()), f"buffer P(fake) outside {band}: {pf[(pf < lo - tol) | (pf > hi + tol)].tolist()}"
    assert torch.allclose(pf, run.buffer_sample_fake_prob, atol=tol), "recorded P(fake) differs from the frozen detector's"


@invariant("band-buffer-holds-only-samples-in-the-critics-band")
@settings(max_examples=2, deadline=None)
@given(_SEEDS)
def band_buffer(ctx: Any, seed: int) -> None:
    """With ``buffer_band = (lo, hi)`` the buffer holds only samples the frozen detector scores at P(fake) in [lo, hi]."""
    check_band_buffer(probe_stage1, seed, *shipped(ctx))
