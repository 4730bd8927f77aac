"""The CoDiLA interface between a frozen masked-diffusion LM and a small causal "local AR".

CoDiLA (Hersche, Menet, Tanios, Rahimi, "Locally coherent parallel decoding in diffusion language
models", ICML 2026, arXiv 2603.20216) factorises the reverse model over blocks of ``B`` tokens and
decodes each block jointly with an auxiliary AR that sees only the DLM's per-position marginals:

* marginals ``pi^j in Delta^{|V|-1}`` of the block's positions, from one DLM forward (Sec. 3, "block-level
  factorisation"), restricted here to the shared vocabulary (zero mass on MASK, pad/BOS and the boundary
  tokens: :func:`restrict_marginals`);
* soft embeddings ``e^j = sum_v pi^j(v) E_phi(v)`` (:func:`soft_embeddings`), the expectation of the AR's
  input embedding under the marginal;
* AR input ``[E(<think>), e^1..e^B, E(</think>)]`` then causal decoding
  ``p_phi(b | pi) = prod_j p_phi(b_j | <think>, e^{1:B}, </think>, b_{<j})`` (:func:`block_logits`,
  :func:`decode_block`);
* block entropy ``h(k) = (1/k) sum_{j<=k} H[pi^j]`` that the schedules rank blocks by (:func:`block_entropy`);
* top-k conditioning (the ablation Theorem 3.3 proves insufficient): the marginal truncated to its top-k
  entries and renormalised before the soft embedding (:func:`truncate_topk`; k = 1 is a one-hot);
* AR verification: positions where the AR's top-1 disagrees with the DLM's proposal get their confidence
  multiplied by a penalty in [0, 1] (:func:`verify_penalise`);
* total correlation ``sum_j H[x_j] - H[b]`` (:func:`total_correlation`), the per-block NELBO gain of the block
  over the token factorisation (Theorem 3.2).

The formulas come from the paper as summarised by a third-party note (no public code exists; see
docs/methods/codila.md for what is reconstructed).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from zoo.common.ar_cache import cache_kwarg, new_cache
from zoo.common.discrete import gumbel_max

__all__ = [
    "restrict_marginals", "soft_embeddings", "truncate_topk", "conditioning_probs", "entropy", "block_entropy",
    "total_correlation", "verify_penalise", "block_logits", "block_nll", "decode_block", "sample_token",
]


# ----------------------------------------------------------------------------- marginals and soft embeddings
def restrict_marginals(logits: torch.Tensor, excluded_ids: Iterable[int], vocab_size: int | None = None) -> torch.Tensor:
    """The DLM marginals handed to the AR: ``softmax`` of ``logits [..., V_D]`` over the shared vocabulary,
    i.e. the first ``vocab_size`` ids (the AR's table may be larger, never smaller) with the ``excluded_ids``
    (MASK, pad/BOS, the boundary tokens) set to probability exactly 0. Rows sum to 1."""
    lg = logits.float()
    if vocab_size is not None:
        lg = lg[..., :vocab_size]
    lg = lg.clone()
    ex = [i for i in set(int(i) for i in excluded_ids) if 0 <= i < lg.shape[-1]]
    if ex:
        lg[..., ex] = float("-inf")
    return torch.softmax(lg, -1)


def soft_embeddings(probs: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """``e = probs @ table[:V]``: the expected input embedding under each row of ``probs [..., V]`` for an
    embedding table ``[V_AR >= V, d]`` (paper Sec. 3, "soft-conditioning interface")."""
    V = probs.shape[-1]
    if table.shape[0] < V:
        raise ValueError(f"the AR's embedding table has {table.shape[0]} rows, the marginals {V} entries: the AR "
                         "vocabulary must contain the DLM's")
    return probs.to(table.dtype) @ table[:V]


def truncate_topk(probs: torch.Tensor, k: int) -> torch.Tensor:
    """``probs`` truncated to its ``k`` largest entries per row and renormalised (top-k conditioning of APD /
    FlashDLLM-style schemes; ``k = 1`` gives the one-hot of the mode). Ties are broken by ``torch.topk``."""
    if k < 1:
        raise ValueError(f"top-k conditioning needs k >= 1, got {k}")
    k = min(k, probs.shape[-1])
    top = probs.topk(k, dim=-1)
    out = torch.zeros_like(probs).scatter(-1, top.indices, top.values)
    return out / out.sum(-1, keepdim=True)


def conditioning_probs(probs: torch.Tensor, conditioning: str = "soft", topk: int = 1) -> torch.Tensor:
    """What the AR is conditioned on: the full marginals (``"soft"``) or their top-k truncation (``"topk"``)."""
    if conditioning == "soft":
        return probs
    if conditioning == "topk":
        return truncate_topk(probs, topk)
    raise ValueError(f"unknown conditioning {conditioning!r}; 'soft' or 'topk'")


# ----------------------------------------------------------------------------- entropies
def entropy(probs: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in nats of each row of ``probs [..., V]`` (``0 log 0 = 0``)."""
    p = probs.double()
    return -(p * torch.where(p > 0, p.log(), torch.zeros_like(p))).sum(-1)


def block_entropy(probs: torch.Tensor) -> torch.Tensor:
    """``h(k) = (1/k) sum_{j<=k} H[pi^j]`` for ``k = 1..B`` of a block's marginals ``[B, V]`` (the schedules'
    score, paper Sec. 3 "inference"); values lie in ``[0, log V]``."""
    H = entropy(probs)
    return H.cumsum(0) / torch.arange(1, H.shape[0] + 1, dtype=H.dtype)


def total_correlation(joint: torch.Tensor) -> float:
    """``sum_j H[x_j] - H[x_1..x_B]`` (nats) of a joint table ``[V]*B``: the NELBO gain of the block over the
    token factorisation on a fully masked block (Theorem 3.2); 0 iff the block is independent."""
    p = joint.double() / joint.double().sum()
    B = p.dim()
    h_joint = float(entropy(p.reshape(-1)))
    h_marg = 0.0
    for j in range(B):
        dims = [d for d in range(B) if d != j]
        h_marg += float(entropy(p.sum(dim=dims) if dims else p))
    return h_marg - h_joint


# ----------------------------------------------------------------------------- verification
def verify_penalise(confidence: torch.Tensor, agree: torch.Tensor, penalty: float) -> torch.Tensor:
    """AR-verification mode: positions whose AR top-1 disagrees with the DLM proposal get ``confidence *
    penalty`` (``penalty in [0, 1]``, confidences non-negative); agreeing positions are unchanged."""
    if not 0.0 <= penalty <= 1.0:
        raise ValueError(f"verify penalty must lie in [0, 1], got {penalty}")
    return torch.where(agree, confidence, confidence * penalty)


# ----------------------------------------------------------------------------- the local AR
def _embed_table(ar: Any) -> torch.Tensor:
    return ar.get_input_embeddings().weight


def _prefix(ar: Any, probs: torch.Tensor, boundary: Sequence[int] | None) -> torch.Tensor:
    """``[N, B+2, d]`` inputs ``[E(<think>), e^1..e^B, E(</think>)]`` for marginals ``probs [N, B, V]``
    (no boundary tokens when ``boundary`` is None: the paper's no-think-tags ablation)."""
    table = _embed_table(ar)
    e = soft_embeddings(probs, table)
    if not boundary:
        return e
    open_, close = (table[int(i)] for i in boundary)
    N = probs.shape[0]
    return torch.cat([open_.expand(N, 1, -1), e, close.expand(N, 1, -1)], 1)


def block_logits(ar: Any, probs: torch.Tensor, tokens: torch.Tensor, boundary: Sequence[int] | None) -> torch.Tensor:
    """Teacher-forced AR logits ``[N, B, V_AR]``: entry ``j`` is ``log p_phi(. | <think>, e^{1:B}, </think>,
    tokens_{<j})`` for marginals ``probs [N, B, V]`` and block tokens ``tokens [N, B]`` (one forward)."""
    pre = _prefix(ar, probs, boundary)
    B = tokens.shape[1]
    if B > 1:
        inp = torch.cat([pre, ar.get_input_embeddings()(tokens[:, :-1])], 1)
    else:
        inp = pre
    out = ar(inputs_embeds=inp).logits
    return out[:, pre.shape[1] - 1: pre.shape[1] - 1 + B].float()


def block_nll(ar: Any, probs: torch.Tensor, tokens: torch.Tensor, boundary: Sequence[int] | None) -> torch.Tensor:
    """``-log p_phi(b | pi)`` per row ``[N]`` (nats): the block term of CoDiLA's block-masked NELBO."""
    lg = torch.log_softmax(block_logits(ar, probs, tokens, boundary), -1)
    return -lg.gather(-1, tokens.unsqueeze(-1)).squeeze(-1).sum(-1)


def sample_token(logits: torch.Tensor, temperature: float, generator: torch.Generator | None,
                 allowed: torch.Tensor | None = None) -> torch.Tensor:
    """Argmax at ``temperature == 0``, else Gumbel-max on ``logits / temperature``; ids outside ``allowed``
    (a boolean vocabulary mask) are never drawn."""
    lg = logits.float()
    if allowed is not None:
        lg = lg.masked_fill(~allowed[: lg.shape[-1]], float("-inf"))
    if temperature <= 0:
        return lg.argmax(-1)
    return gumbel_max(lg / temperature, generator)


@torch.no_grad()
def decode_block(ar: Any, probs: torch.Tensor, boundary: Sequence[int] | None, temperature: float,
                 generator: torch.Generator | None, allowed: torch.Tensor | None = None) -> tuple[list[int], int]:
    """Decode one block causally: ``b_j ~ p_phi(. | <think>, e^{1:B}, </think>, b_{<j})`` for marginals
    ``probs [B, V]``, with a KV cache (one prefix forward, then one forward per further token). Returns the
    ``B`` tokens and the number of AR forwards (``B``)."""
    pre = _prefix(ar, probs.unsqueeze(0), boundary)
    cache = new_cache(ar)
    kw = cache_kwarg(ar)
    logits = ar(inputs_embeds=pre, use_cache=True, **{kw: cache}).logits[:, -1]
    out, forwards = [], 1
    for j in range(probs.shape[0]):
        tok = int(sample_token(logits[0], temperature, generator, allowed))
        out.append(tok)
        if j + 1 < probs.shape[0]:
            logits = ar(input_ids=torch.tensor([[tok]], device=pre.device), use_cache=True, **{kw: cache}).logits[:, -1]
            forwards += 1
    return out, forwards


def log_uniform(n: int) -> float:
    """``log n`` (nats): the entropy of a uniform law on n outcomes."""
    return math.log(n)
