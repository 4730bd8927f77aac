"""Metric checks for ``specs/robuq.yaml``: ``fn(pipeline, **check_params) -> float`` (seed 0, memoised
per pipeline), the numbers ``zoo bench robuq`` prints."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import torch

from registry.contract import metric_check

from .model import layer_groups, pack_model
from .params import ActErrorParams, AttnErrorParams, OutlierEpsParams, OutlierOperatorParams, PackedSizeRatioParams, SampleStatParams
from .procedures import digits_eps_batch
from .quant import fast_hadamard, quantize_tokens


@torch.no_grad()
def recorded_inputs(model: Any, names: list[str], n: int = 64, seed: int = 0) -> dict[str, torch.Tensor]:
    """The first positional input of each named submodule during one forward pass on the fixed noised
    train batch :func:`~.procedures.digits_eps_batch` ``(n, seed)``."""
    inputs: dict[str, torch.Tensor] = {}
    hooks = [model.get_submodule(nm).register_forward_pre_hook(lambda m, a, nm=nm: inputs.__setitem__(nm, a[0].detach())) for nm in names]
    try:
        xt, t, y, _ = digits_eps_batch(n, seed)
        model(xt, t, class_labels=y)
    finally:
        for h in hooks:
            h.remove()
    return inputs


@torch.no_grad()
def activation_error(model: Any, bits: int, hadamard: bool, n: int = 64, seed: int = 0) -> float:
    """Relative output error ``sum_l ||Q(x_l) W_l^T - x_l W_l^T||^2 / sum_l ||x_l W_l^T||^2`` over the targeted
    Linear layers of an FP DiT (inputs recorded on a fixed noised train batch), with the per-token
    ``bits``-bit quantiser applied to ``x`` or to the rotated ``x H`` (weights FP: the activation error alone)."""
    names = [n_ for names in layer_groups(model).values() for n_ in names]
    inputs = recorded_inputs(model, names, n, seed)
    num = den = 0.0
    for nm in names:
        w = model.get_submodule(nm).weight.detach()
        x = inputs[nm]
        ref = x @ w.T
        xq = quantize_tokens(fast_hadamard(x), bits) @ fast_hadamard(w).T if hadamard else quantize_tokens(x, bits) @ w.T
        num += float(((xq - ref) ** 2).sum())
        den += float((ref**2).sum())
    return num / den


@torch.no_grad()
def attention_error(model: Any, bits: int, n: int = 64, seed: int = 0) -> float:
    """Relative output error ``sum_l ||A_b(x_l) - A(x_l)||^2 / sum_l ||A(x_l)||^2`` of every block's self-attention
    (``attn1``, output projection included) on the FP DiT's own attention inputs (a fixed noised train
    batch): ``A`` = diffusers' stock processor, ``A_b`` = :class:`~.attention.QuantAttnProcessor` at ``bits``
    (both attention products' operands quantised per token; the projections stay FP)."""
    from diffusers.models.attention_processor import AttnProcessor2_0

    from .attention import QuantAttnProcessor

    names = [f"transformer_blocks.{i}.attn1" for i in range(len(model.transformer_blocks))]
    inputs = recorded_inputs(model, names, n, seed)
    num = den = 0.0
    for nm in names:
        a, x = model.get_submodule(nm), inputs[nm]
        ref = AttnProcessor2_0()(a, x)
        num += float(((QuantAttnProcessor(bits)(a, x) - ref) ** 2).sum())
        den += float((ref**2).sum())
    return num / den


@metric_check(params=AttnErrorParams)
def attn_error(pipeline: Any, bits: int, role: str = "dit") -> float:
    """:func:`attention_error` of the FP role's self-attention at ``bits``."""
    return attention_error(pipeline.models[role], bits)


@metric_check(params=ActErrorParams)
def act_error(pipeline: Any, bits: int, hadamard: bool, role: str = "dit") -> float:
    """:func:`activation_error` of the FP role at ``bits`` with or without the Hadamard rotation."""
    return activation_error(pipeline.models[role], bits, hadamard)


@metric_check(params=OutlierOperatorParams)
def outlier_operator_error(pipeline: Any, scale: float, hadamard: bool, term: str = "layer_out", seed: int = 0, n_channels: int = 2,
                           role: str = "dit") -> float:
    """One ``total`` term of :func:`~.inject.operator_oracle` on the FP role with outlier channels injected
    (:func:`~.inject.inject_outlier_channels`, every site, ``scale``, channel-choice ``seed``), no rotation or Hadamard."""
    from .inject import injected_model, operator_oracle

    def run() -> dict[str, Any]:
        return operator_oracle(injected_model(pipeline.models[role], scale, seed, n_channels)[0])["total"]

    total = pipeline.memo(("robuq-outlier-oracle", role, scale, seed, n_channels), run)
    return float(total["hadamard" if hadamard else "plain"][term])


@metric_check(params=OutlierEpsParams)
def outlier_eps_mse(pipeline: Any, scale: float, arm: str, seeds: list[int] | None = None, n_channels: int = 2, role: str = "dit") -> float:
    """Mean over injection ``seeds`` (default 0, 1, 2) of the held-out epsilon-MSE (:func:`~.procedures.heldout_eps_mse`)
    of W1.58A4 PTQ (:func:`~.inject.injected_w158a4`) on the FP role with outlier channels injected at ``scale``:
    ``arm`` = ``hadamard``, ``plain`` or their paired difference ``hadamard_minus_plain`` (the refutation rule's number)."""
    from .inject import injected_w158a4
    from .procedures import heldout_eps_mse

    seeds = list(seeds if seeds is not None else [0, 1, 2])

    def run() -> dict[str, list[float]]:
        fp = pipeline.models[role]
        return {a: [heldout_eps_mse(injected_w158a4(fp, scale, s, a == "hadamard", n_channels)) for s in seeds] for a in ("hadamard", "plain")}

    eps = pipeline.memo(("robuq-outlier-eps", role, scale, tuple(seeds), n_channels), run)
    if arm == "hadamard_minus_plain":
        return sum(h - p for h, p in zip(eps["hadamard"], eps["plain"])) / len(seeds)
    return sum(eps[arm]) / len(seeds)


@metric_check(params=PackedSizeRatioParams)
def packed_size_ratio(pipeline: Any, role: str, fp_role: str = "dit") -> float:
    """File size of the FP role's safetensors state dict / file size of the quantised role's packed export."""
    from safetensors.torch import save_file

    with tempfile.TemporaryDirectory() as d:
        fp = Path(d) / "fp.safetensors"
        save_file({k: v.contiguous() for k, v in pipeline.models[fp_role].state_dict().items()}, str(fp))
        packed = pack_model(pipeline.models[role], Path(d) / "packed.safetensors")
        return fp.stat().st_size / packed.stat().st_size


def sample_quality(pipeline: Any, sampler: str, per_class: int = 20, seed: int = 0) -> dict[str, float]:
    """Classifier accuracy and PCA-20 Frechet distance (vs the test split) of ``per_class`` samples per digit."""
    from zoo.common.digits import digits_classifier, frechet_distance

    def run() -> dict[str, float]:
        out = pipeline.procedures[sampler](seed=seed, per_class=per_class)
        return {"accuracy": digits_classifier().accuracy(out.samples, out.labels), "frechet": frechet_distance(out.samples)}

    return pipeline.memo(("robuq", sampler, per_class, seed), run)


@metric_check(params=SampleStatParams)
def sample_stat(pipeline: Any, sampler: str, stat: str, per_class: int = 20) -> float:
    """``accuracy`` or ``frechet`` of :func:`sample_quality` for one sampler (slow: DDIM-20, 200 samples)."""
    return float(sample_quality(pipeline, sampler, per_class)[stat])
