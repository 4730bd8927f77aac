"""Training of the CoDiLA toys (used by ``zoo train codila``, :mod:`.train`, and the ``train-local-ar`` recipe).

* The DLM (drafter): the MDLM/LLaDA objective (:func:`zoo.common.masked_dlm.masked_diffusion_loss`, 1/t
  weighting, linear schedule) on sequences of the toy law after a BOS.
* The local AR, DLM frozen: CoDiLA's block-masked objective (paper Sec. 3, "training objective"). A context
  is masked token-wise with probability ``t ~ U(0, 1)``, then a block of ``k ~ U{1..B}`` consecutive positions
  is masked *together* (starting on the decoding grid); the frozen DLM gives the block's marginals on that input and the AR is trained by
  cross-entropy on the block's clean tokens given ``[<think>, e^{1:k}, </think>]``. Departure: the NELBO
  weight ``(alpha_{t-1} - alpha_t) / (1 - alpha_t)`` is dropped (plain cross-entropy per block, the form the
  paper note gives for the practical loss), and blocks of every length ``k <= B`` are trained (the
  dynamic schedule decodes prefixes of blocks).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from zoo.common.masked_dlm import mask_tokens, masked_diffusion_loss
from zoo.common.training import adamw_one_cycle, optimizer_step, progress

from .core import block_nll, conditioning_probs, restrict_marginals
from .tasks import Task

__all__ = ["encode", "sample_batch", "train_dlm", "train_local_ar", "local_ar_batch", "loss_gap"]


def encode(tok: Any, texts: Sequence[str]) -> torch.Tensor:
    """``[n, 1 + L]``: BOS then the letters of each text."""
    return torch.tensor([tok.encode(t) for t in texts], dtype=torch.long)


def sample_batch(task: Task, tok: Any, n: int, g: torch.Generator) -> torch.Tensor:
    return encode(tok, task.sample(n, g))


def train_dlm(dlm: torch.nn.Module, task: Task, tok: Any, steps: int, batch: int, lr: float, g: torch.Generator,
              bar: bool = True) -> list[float]:
    """Fit the masked denoiser to the task law (LLaDA loss, t ~ U(1e-3, 1), BOS never masked)."""
    dlm.train()
    opt, sched = adamw_one_cycle(dlm.parameters(), lr, steps, pct_start=0.1, weight_decay=0.01)
    losses = []
    it = progress(range(steps), desc=f"DLM[{task.name}]") if bar else range(steps)
    for _ in it:
        x = sample_batch(task, tok, batch, g)
        t = torch.rand(batch, 1, generator=g) * (1 - 1e-3) + 1e-3
        xt, m = mask_tokens(x, t, tok.mask_token_id, g, keep_prefix=1)
        loss = masked_diffusion_loss(dlm(xt), x, m, t, "elbo", normalizer=batch * task.length)
        optimizer_step(dlm, opt, sched, loss, clip=1.0)
        losses.append(float(loss.detach()))
    dlm.eval()
    return losses


@torch.no_grad()
def local_ar_batch(dlm: torch.nn.Module, x: torch.Tensor, k: int, g: torch.Generator, mask_id: int,
                   excluded: Sequence[int], vocab: int, starts: torch.Tensor | None = None,
                   context_t: torch.Tensor | None = None, grid: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Block-masked inputs for the local AR: marginals ``[n, k, V]`` of a block of ``k`` positions (masked
    together) under a context masked with probability ``t``, and the block's clean tokens ``[n, k]``.
    ``starts`` / ``context_t`` fix the block starts (generated positions, 0-based) and ``t`` per row; random
    starts are multiples of ``grid`` (the decoding grid: an AR that sees only marginals cannot tell a block
    aligned with the grid from a shifted one when their marginals coincide) or follow a decoded token."""
    n, Lp = x.shape
    L = Lp - 1
    t = torch.rand(n, 1, generator=g) if context_t is None else context_t.reshape(n, 1)
    xt, _ = mask_tokens(x, t, mask_id, g, keep_prefix=1)
    if starts is None:
        # a block starts on the grid, or right after a decoded token (where the dynamic schedule's runs start)
        ok = torch.zeros(n, L - k + 1, dtype=torch.bool)
        ok[:, ::grid] = True
        ok[:, 1:] |= xt[:, 1: L - k + 1] != mask_id
        starts = torch.multinomial(ok.double(), 1, generator=g).squeeze(-1)
    cols = 1 + starts.reshape(n, 1) + torch.arange(k).reshape(1, k)
    xt.scatter_(1, cols, mask_id)
    out = dlm(xt)
    out = out if isinstance(out, torch.Tensor) else out.logits
    logits = out.gather(1, cols.unsqueeze(-1).expand(-1, -1, out.shape[-1]))
    probs = restrict_marginals(logits, excluded, vocab)
    return probs, x.gather(1, cols)


def train_local_ar(ar: torch.nn.Module, dlm: torch.nn.Module, sample: Callable[[int, torch.Generator], torch.Tensor],
                   steps: int, batch: int, lr: float, max_block: int, g: torch.Generator, mask_id: int,
                   excluded: Sequence[int], boundary: Sequence[int] | None, conditioning: str = "soft", topk: int = 1,
                   bar: bool = True, desc: str = "local AR", grid: int = 1) -> list[float]:
    """Fit the local AR on block-masked inputs of the frozen ``dlm`` (``sample(n, g) -> [n, 1 + L]`` ids)."""
    ar.train()
    dlm.eval()
    vocab = ar.get_input_embeddings().weight.shape[0]
    opt, sched = adamw_one_cycle(ar.parameters(), lr, steps, pct_start=0.1, weight_decay=0.01)
    losses = []
    it = progress(range(steps), desc=desc) if bar else range(steps)
    for _ in it:
        x = sample(batch, g)
        k = int(torch.randint(1, max_block + 1, (1,), generator=g))
        probs, toks = local_ar_batch(dlm, x, min(k, x.shape[1] - 1), g, mask_id, excluded, vocab, grid=grid)
        cond = conditioning_probs(probs, conditioning, topk)
        loss = block_nll(ar, cond, toks, boundary).mean()
        optimizer_step(ar, opt, sched, loss, clip=1.0)
        losses.append(float(loss.detach()))
    ar.eval()
    return losses


@torch.no_grad()
def loss_gap(dlm: torch.nn.Module, ar: torch.nn.Module, task: Task, tok: Any, n: int, block: int, seed: int,
             boundary: Sequence[int] | None, excluded: Sequence[int], conditioning: str = "soft",
             topk: int = 1) -> dict[str, float]:
    """Token-factorised minus block NLL (nats per block) on grid-aligned, fully masked blocks of ``block``
    positions (context masked with ``t ~ U(0, 1)``): ``sum_j -log pi_j(b_j)`` vs ``-log p_phi(b | pi)``.
    Theorem 3.2: its expectation is the within-block total correlation (``log 4`` for an XOR word)."""
    g = torch.Generator().manual_seed(seed)
    x = sample_batch(task, tok, n, g)
    n_grid = task.length // block
    starts = torch.randint(0, n_grid, (n,), generator=g) * block
    vocab = ar.get_input_embeddings().weight.shape[0]
    probs, toks = local_ar_batch(dlm, x, block, g, tok.mask_token_id, excluded, vocab, starts=starts)
    token_nll = -probs.clamp_min(1e-30).log().gather(-1, toks.unsqueeze(-1)).squeeze(-1).sum(-1)
    blk = block_nll(ar, conditioning_probs(probs, conditioning, topk), toks, boundary)
    return {"token_nll": float(token_nll.mean()), "block_nll": float(blk.mean()),
            "gap": float((token_nll - blk).mean()), "gap_se": float((token_nll - blk).std() / n**0.5)}
