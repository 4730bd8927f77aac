"""Discrete sampling shared by the text samplers: uniform noise from a ``torch.Generator``, Gumbel-max,
inverse-CDF categorical draws, nucleus (top-p) truncation and tempered draft logits with an explicit
top-p order.

Every function works on batched tensors whose last dimension is the vocabulary and draws its noise in
float64 on the generator's own device, so a CPU generator gives the same tokens on CPU and CUDA.

* Gumbel-max: ``argmax_i (l_i + G_i)``, ``G_i = -log(-log U_i)`` is a draw from ``softmax(l)``
  (noise in float64 as LLaDA's ``add_gumbel_noise``, https://github.com/ML-GSAI/LLaDA).
* Top-p (Holtzman et al. 2020, arXiv 1904.09751): the smallest set of most likely tokens whose mass
  reaches ``p``.
* Top-p order (:func:`draft_logits`): PoE-Bridge's repository (https://github.com/juntongshi48/poe-bridge)
  truncates the *untempered* DLM logits to the nucleus and then divides by the lane temperature
  (``"before_temperature"``); this project's default truncates *after* the temperature
  (``"after_temperature"``), i.e. the nucleus of the law the lane actually draws from. The two agree
  at ``tau = 1`` or ``top_p = 1``; at ``tau < 1`` the tempered law is sharper, so the nucleus taken
  after the temperature is never larger than the one taken before.
"""
from __future__ import annotations

import torch

from zoo.common.params import TopPOrder  # noqa: F401 (torch-free: read by params modules)

NEG_INF = float("-inf")

TOP_P_ORDERS = ("after_temperature", "before_temperature")


def as_col(tau: float | torch.Tensor, ref: torch.Tensor) -> torch.Tensor | float:
    """Broadcast a per-row temperature ``[K]`` against ``[K, ..., V]`` tensors (floats pass through)."""
    if isinstance(tau, torch.Tensor):
        return tau.to(ref.dtype).reshape(tau.shape + (1,) * (ref.dim() - tau.dim()))
    return tau


def tempered(logits: torch.Tensor, tau: float | torch.Tensor) -> torch.Tensor:
    """``logits / tau`` with ``tau`` a float or a per-row tensor ``[K]``."""
    return logits / as_col(tau, logits)


def top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Nucleus truncation: keep the smallest set of tokens whose probability reaches ``top_p``
    (the most likely token is always kept); the others get ``-inf``. ``top_p >= 1`` returns ``logits``."""
    if top_p >= 1.0:
        return logits
    sorted_logits, idx = torch.sort(logits, dim=-1, descending=True)
    probs = torch.softmax(sorted_logits, dim=-1)
    cum = probs.cumsum(-1)
    remove = (cum - probs) >= top_p  # mass strictly before this token already reaches top_p
    remove[..., 0] = False
    sorted_logits = sorted_logits.masked_fill(remove, NEG_INF)
    out = torch.empty_like(logits)
    out.scatter_(-1, idx, sorted_logits)
    return out


def draft_logits(logits: torch.Tensor, tau: float | torch.Tensor, top_p: float,
                 order: TopPOrder = "after_temperature") -> torch.Tensor:
    """Normalised log-probabilities of the truncated, tempered draft law.

    ``after_temperature`` (default): ``top_p(log_softmax(l / tau))``; ``before_temperature`` (PoE-Bridge's
    repository): the nucleus is chosen on ``softmax(l)`` and the kept logits are then divided by
    ``tau``. Both return log-probabilities whose kept entries are ``log_softmax(l / tau)`` (un-renormalised
    over the nucleus: Gumbel-max and ``softmax`` do not need it)."""
    if order == "after_temperature":
        return top_p_filter(torch.log_softmax(tempered(logits, tau), -1), top_p)
    if order == "before_temperature":
        keep = torch.isfinite(top_p_filter(torch.log_softmax(logits, -1), top_p))
        lp = torch.log_softmax(tempered(logits, tau), -1)
        return lp.masked_fill(~keep.expand_as(lp), NEG_INF)
    raise ValueError(f"unknown top-p order {order!r}; one of {TOP_P_ORDERS}")


def uniform(shape, generator: torch.Generator | None, device) -> torch.Tensor:
    """float64 U[0,1) drawn from ``generator`` on the generator's own device, then moved to ``device``
    (a CPU generator keeps results identical across CPU and CUDA runs)."""
    gdev = generator.device if generator is not None else torch.device(device)
    return torch.rand(shape, generator=generator, dtype=torch.float64, device=gdev).to(device)


def gumbel_noise(shape, generator: torch.Generator | None, device) -> torch.Tensor:
    """float64 Gumbel(0, 1) noise ``-log(-log u)`` from :func:`uniform` draws."""
    u = uniform(shape, generator, device)
    e = -torch.log(u.clamp_min(1e-300))  # Exp(1)
    return -torch.log(e.clamp_min(1e-300))  # Gumbel(0, 1)


def gumbel_max(logits: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One sample per row of softmax(logits) by the Gumbel-max trick (noise in float64, as LLaDA):
    ``argmax(logits + G)`` with ``G = gumbel_noise(logits.shape)``."""
    return (logits.double() + gumbel_noise(logits.shape, generator, logits.device)).argmax(-1)


def categorical(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One sample per row of an (unnormalised, non-negative) probability table by inverse CDF."""
    p = probs.double()
    cdf = p.cumsum(-1)
    total = cdf[..., -1:]
    u = uniform(p.shape[:-1] + (1,), generator, p.device) * total
    idx = torch.searchsorted(cdf.contiguous(), u.contiguous(), right=True).squeeze(-1)
    return idx.clamp_max(p.shape[-1] - 1)
