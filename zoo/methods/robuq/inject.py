"""Function-preserving outlier-channel injection into an FP diffusers DiT, and the operator-level oracle on it.

Why: the digits DiT's weights are lighter-tailed than Gaussian and its activations have only mild channel
outliers (card, "Why the toy cannot show..."), while the Hadamard rotation of RobuQ (arXiv 2509.23582,
RobustQuantizer; QuaRot, arXiv 2404.00456) is meant for the outlier channels of large DiTs. This module makes
such channels without changing the FP function: on a pair of maps with nothing nonlinear between them, channel
``c`` of the producer's output is scaled by ``s`` and input column ``c`` of the consumer by ``1 / s``. Sites
(per transformer block of a ``ada_norm_zero`` DiT, width ``D``):

* ``v_out``: ``attn1.to_v`` output row ``c`` (weight and bias) x ``s``; ``attn1.to_out.0`` input column ``c`` x ``1/s``
  (``softmax(QK^T / sqrt(d)) V`` is linear in ``V`` per channel);
* ``adaln_attn``: the adaLN modulation ``x_mod = LN(x) (1 + scale_msa) + shift_msa`` (``norm1.linear`` output chunks 0
  and 1 of 6, diffusers' ``AdaLayerNormZero``): ``shift_msa`` row ``c`` x ``s`` and ``scale_msa`` row ``c`` such that
  ``1 + scale_msa`` is x ``s`` (weight x ``s``, bias ``b -> s (1 + b) - 1``), so ``x_mod[:, c]`` is x ``s``; the
  input column ``c`` of ``to_q``, ``to_k`` and ``to_v`` x ``1/s``;
* ``adaln_ff``: the same on ``shift_mlp`` / ``scale_mlp`` (chunks 3 and 4), ``ff.net.0.proj`` input column ``c`` x ``1/s``.

Not a site: ``ff.net.2``'s input, the output of a GELU, which is not positively homogeneous (``GELU(s u) != s GELU(u)``),
so scaling ``ff.net.0.proj``'s rows and ``ff.net.2``'s columns changes the function (the tests' negative control).
"""
from __future__ import annotations

import copy
from typing import Any, Iterable, Sequence

import torch
from torch import nn

from .model import layer_groups, quant_modules
from .quant import QuantLinear, fast_hadamard, quantize_tokens, ternarize

__all__ = ["SITES", "inject_outlier_channels", "function_deviation", "operator_oracle", "channel_outlier_ratio", "injected_model", "injected_w158a4"]

SITES: tuple[str, ...] = ("v_out", "adaln_attn", "adaln_ff")


@torch.no_grad()
def _scale_modulation(lin: nn.Linear, width: int, shift_chunk: int, scale_chunk: int, c: torch.Tensor, s: float) -> None:
    """``LN(x) (1 + scale) + shift`` with channel ``c`` x ``s``: shift row x s; ``1 + scale`` x s."""
    sh, sc = shift_chunk * width + c, scale_chunk * width + c
    lin.weight[sh] *= s
    lin.bias[sh] *= s
    lin.weight[sc] *= s
    lin.bias[sc] = s * (1 + lin.bias[sc]) - 1


@torch.no_grad()
def inject_outlier_channels(model: Any, sites: Sequence[str] = SITES, n_channels: int = 2, scale: float = 10.0, seed: int = 0,
                            blocks: Iterable[int] | None = None) -> dict[str, list[int]]:
    """Inject outlier channels into an FP ``DiTTransformer2DModel`` in place, preserving its function (module docstring).

    For every block in ``blocks`` (default: all) and every site in ``sites`` (of :data:`SITES`, in that order),
    ``n_channels`` distinct channels are drawn by ``torch.randperm`` from one generator seeded with ``seed`` and scaled
    by ``scale`` (> 0) at the producer, ``1 / scale`` at the consumer. Returns ``{"blocks.<i>.<site>": channels}``."""
    unknown = [x for x in sites if x not in SITES]
    if unknown:
        raise ValueError(f"unknown injection sites {unknown}; expected a subset of {list(SITES)}")
    if not scale > 0:
        raise ValueError(f"scale must be > 0 (a sign flip is not an outlier), got {scale}")
    if quant_modules(model):
        raise ValueError("inject into the FP model, before quantize_dit (found QuantLinear modules)")
    layer_groups(model)  # raises on a model without transformer_blocks
    width = model.transformer_blocks[0].attn1.to_v.in_features
    if not 1 <= n_channels <= width:
        raise ValueError(f"n_channels must be in 1..{width}, got {n_channels}")
    g = torch.Generator().manual_seed(int(seed))
    chosen: dict[str, list[int]] = {}
    s = float(scale)
    for i in (range(len(model.transformer_blocks)) if blocks is None else blocks):
        blk = model.transformer_blocks[i]
        if blk.norm_type != "ada_norm_zero":
            raise ValueError(f"block {i}: norm_type {blk.norm_type!r}; the adaLN sites assume ada_norm_zero")
        for site in SITES:
            if site not in sites:
                continue
            c = torch.randperm(width, generator=g)[:n_channels]
            chosen[f"blocks.{i}.{site}"] = sorted(int(v) for v in c)
            if site == "v_out":
                blk.attn1.to_v.weight[c] *= s
                blk.attn1.to_v.bias[c] *= s
                blk.attn1.to_out[0].weight[:, c] /= s
            elif site == "adaln_attn":
                _scale_modulation(blk.norm1.linear, width, 0, 1, c, s)
                for lin in (blk.attn1.to_q, blk.attn1.to_k, blk.attn1.to_v):
                    lin.weight[:, c] /= s
            else:  # adaln_ff
                _scale_modulation(blk.norm1.linear, width, 3, 4, c, s)
                blk.ff.net[0].proj.weight[:, c] /= s
    return chosen


@torch.no_grad()
def function_deviation(a: Any, b: Any, n: int = 64, seed: int = 0) -> float:
    """``max |a(x) - b(x)| / max |a(x)|`` of two DiTs on the fixed noised train batch
    :func:`~.procedures.digits_eps_batch` ``(n, seed)`` (float32: an exact reparametrisation gives ~1e-6)."""
    from .procedures import digits_eps_batch

    xt, t, y, _ = digits_eps_batch(n, seed)
    ya, yb = a(xt, t, class_labels=y).sample, b(xt, t, class_labels=y).sample
    return float((ya - yb).abs().max() / ya.abs().max())


def channel_outlier_ratio(x: torch.Tensor) -> float:
    """Max over channels of the per-channel ``max |x|`` divided by its median over channels (large DiTs: tens+)."""
    m = x.reshape(-1, x.shape[-1]).abs().amax(0)
    return float(m.max() / m.median())


@torch.no_grad()
def operator_oracle(model: Any, a_bits: int = 4, lowrank_rank: int = 8, n: int = 64, seed: int = 0) -> dict[str, Any]:
    """Operator-level errors of every targeted Linear of an FP DiT on its own inputs (recorded on the fixed noised
    train batch), without vs with the Hadamard rotation. Per layer and summed over layers (``total``):

    * ``weight_rel``: ``||T(W) - W||^2 / ||W||^2`` (with rotation: ``T(WH)`` vs ``WH``) -- weight space;
    * ``weight_out``: ``sum ||x E^T||^2 / sum ||x W^T||^2``, ``E = T(W) - W`` or ``T(WH) H - W``: the ternarisation
      error seen through the layer's real inputs (FP activations);
    * ``act_out``: the same for ``Q_b(x)`` or ``Q_b(xH)`` with FP weights (``a_bits``, per-token min-max);
    * ``layer_out``: the installed :class:`~.quant.QuantLinear` (ternary + rank-``lowrank_rank`` FP branch + ``a_bits``
      activations) against the FP layer: the whole W1.58A``b`` operator;
    * ``input_outlier_ratio``: :func:`channel_outlier_ratio` of the layer's inputs (the same with or without rotation).
    """
    from .metrics import recorded_inputs

    names = [nm for group in layer_groups(model).values() for nm in group]
    inputs = recorded_inputs(model, names, n, seed)
    keys = ("weight_rel", "weight_out", "act_out", "layer_out")
    num = {h: dict.fromkeys(keys, 0.0) for h in ("plain", "hadamard")}
    den = {h: dict.fromkeys(keys, 0.0) for h in ("plain", "hadamard")}
    layers: dict[str, Any] = {}
    for nm in names:
        lin = copy.deepcopy(model.get_submodule(nm)).double()
        w, x = lin.weight.detach(), inputs[nm].double()
        ref, full = x @ w.T, lin(x)
        row: dict[str, Any] = {"input_outlier_ratio": channel_outlier_ratio(x)}
        for h in ("plain", "hadamard"):
            if h == "hadamard":
                wr = fast_hadamard(w)
                e = fast_hadamard(ternarize(wr) - wr)  # (T(WH) - WH) H = T(WH) H - W (H symmetric, orthonormal)
                xa = quantize_tokens(fast_hadamard(x), a_bits) @ wr.T
            else:
                wr = w
                e = ternarize(w) - w
                xa = quantize_tokens(x, a_bits) @ w.T
            q = QuantLinear(lin, "ternary", a_bits, h == "hadamard", None, lowrank_rank).eval()
            terms = {"weight_rel": (float(((ternarize(wr) - wr) ** 2).sum()), float((w**2).sum())),
                     "weight_out": (float(((x @ e.T) ** 2).sum()), float((ref**2).sum())),
                     "act_out": (float(((xa - ref) ** 2).sum()), float((ref**2).sum())),
                     "layer_out": (float(((q(x) - full) ** 2).sum()), float((full**2).sum()))}
            row[h] = {k: a / b for k, (a, b) in terms.items()}
            for k, (a, b) in terms.items():
                num[h][k] += a
                den[h][k] += b
        layers[nm] = row
    total = {h: {k: num[h][k] / den[h][k] for k in keys} for h in num}
    return {"layers": layers, "total": total, "a_bits": a_bits, "lowrank_rank": lowrank_rank}


def injected_model(fp: Any, scale: float, seed: int, n_channels: int = 2, sites: Sequence[str] = SITES) -> tuple[Any, dict[str, list[int]]]:
    """A deep copy of the FP DiT ``fp`` with :func:`inject_outlier_channels` applied, and the chosen channels."""
    m = copy.deepcopy(fp)
    return m, inject_outlier_channels(m, sites, n_channels, scale, seed)


def injected_w158a4(fp: Any, scale: float, seed: int, hadamard: bool, n_channels: int = 2, sites: Sequence[str] = SITES) -> Any:
    """The W1.58A4 PTQ model (``quantize_dit`` defaults: rank-8 FP branch, adaLN W4A4, 8-bit attention products) of the
    injected FP DiT, with or without the Hadamard rotation."""
    from .procedures import quantize_dit

    return quantize_dit(injected_model(fp, scale, seed, n_channels, sites)[0], a_bits=4, hadamard=hadamard, lowrank_rank=8)
