"""Training loops of PoE-Bridge's CPU model pairs (one thread, fixed seeds, byte-reproducible), used by the
recipes of :mod:`.train` (``zoo train poe-bridge``: the ``toy`` AR target, the ``toy-equal`` DLM, the ``toy-long``
pair) on a toy task (``task``: ``steps``, the step-by-step addition of :mod:`zoo.common.toy_text`;
``columns``, the column-interleaved addition of :mod:`.columns`).

* :func:`train_ar_qwen2`: the AR target, a ``Qwen2ForCausalLM`` (:func:`~zoo.methods.poe_bridge.toy.build_ar`),
  next-token cross-entropy on the answer and its first EOS (the prompt is not a target);
* :func:`train_dlm_qwen2`: the proposal, a bidirectional Qwen2 of the same size
  (:func:`~zoo.methods.poe_bridge.toy.build_dlm_qwen2`), with the MDLM/LLaDA objective (Sahoo et al. 2024,
  arXiv 2406.07524, eq. 10; Nie et al. 2025, arXiv 2502.09992, eq. 3): each answer-region token (answer,
  EOS, EOS padding to ``max_new_tokens``) is masked with probability ``t ~ U(eps, 1)``, the cross-entropy on
  masked positions is weighted by ``1/t``.

Both use AdamW with a one-cycle schedule (10 % warm-up, weight decay 0.01) and gradient clipping at 1; data
come from a generator seeded with ``seed`` and never include the 256 held-out problems.
"""
from __future__ import annotations

from typing import Any

import torch

from zoo.common.masked_dlm import mask_tokens, masked_diffusion_loss, shift_by_one
from zoo.common.training import adamw_one_cycle, optimizer_step, progress

from .toy import TOY_MAX_NEW_TOKENS, build_ar, build_dlm_qwen2, toy_tokenizer

HELD_OUT = 256  # training skips the first HELD_OUT evaluation problems (the benchmark and checks use <= 256)
MASK_EPS = 1e-3  # t ~ U(MASK_EPS, 1)


def _banned(tok: Any) -> set[tuple[int, int]]:
    return {(e.a, e.b) for e in tok.eval_problems(HELD_OUT)}


def curriculum_digits(step: int, steps: int, digits: int, fraction: float, start: int) -> int | None:
    """Active operand digits at ``step`` of a length curriculum: ``start`` ramping linearly to ``digits`` over the
    first ``fraction`` of the ``steps``, then all (None, also when ``fraction`` is 0: no curriculum)."""
    ramp = fraction * steps
    if fraction <= 0 or step >= ramp:
        return None
    return min(digits, start + int((digits - start) * step / ramp))


def train_ar_qwen2(steps: int, batch_size: int, lr: float, digits: int, seed: int,
                   max_new_tokens: int = TOY_MAX_NEW_TOKENS, desc: str = "AR", task: str = "steps",
                   curriculum: float = 0.0, curriculum_start: int = 3, **arch: Any) -> torch.nn.Module:
    """Train the AR target (``build_ar(digits, max_new_tokens, **arch)``; ``arch`` may set ``init_seed``) by
    next-token cross-entropy on the answer tokens and the first EOS, data drawn from a generator seeded
    ``seed``; returns it in eval mode. ``curriculum`` > 0 (``columns`` task only): short additions first
    (:func:`curriculum_digits`; the operand digits above the active ones are 0)."""
    if curriculum > 0 and task != "columns":
        raise ValueError("the length curriculum is defined for the columns task only")
    tok = toy_tokenizer(task, digits)
    banned = _banned(tok)
    model = build_ar(digits=digits, max_new_tokens=max_new_tokens, task=task, **arch).train()
    opt, sched = adamw_one_cycle(model.parameters(), lr, steps, pct_start=0.1, weight_decay=0.01)
    g = torch.Generator().manual_seed(seed)
    n_ans = tok.answer_length()
    for step in (bar := progress(range(steps), desc=desc)):
        active = curriculum_digits(step, steps, digits, curriculum, curriculum_start)
        if active is None:
            x, P = tok.training_batch(batch_size, g, banned, max_new_tokens)
        else:
            x, P = tok.training_batch(batch_size, g, banned, max_new_tokens, active_digits=active)
        x = x[:, : P + n_ans]
        logits = model(input_ids=x[:, :-1]).logits
        tgt = x[:, 1:].clone()
        tgt[:, : P - 1] = -100
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=-100)
        optimizer_step(model, opt, sched, loss, clip=1.0)
        if step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.4f}")
    return model.eval()


def train_dlm_qwen2(steps: int, batch_size: int, lr: float, digits: int, seed: int,
                    max_new_tokens: int = TOY_MAX_NEW_TOKENS, desc: str = "DLM (Qwen2, bidirectional)",
                    init_from: dict[str, torch.Tensor] | None = None, task: str = "steps",
                    **arch: Any) -> torch.nn.Module:
    """Train the bidirectional Qwen2 proposal (``build_dlm_qwen2(digits, max_new_tokens, **arch)``; ``arch`` may
    set ``init_seed``) with the masked-diffusion ELBO over the answer region, data and masks drawn from a
    generator seeded ``seed``; returns it in eval mode. ``init_from``: start from these weights (the trained AR
    target's state dict, as Dream-7B starts from Qwen2.5-7B; use with ``shift_logits=True`` so that the AR's
    next-token read-out is kept: output ``i - 1`` predicts token ``i``)."""
    tok = toy_tokenizer(task, digits)
    banned = _banned(tok)
    model = build_dlm_qwen2(digits=digits, max_new_tokens=max_new_tokens, task=task, **arch)
    if init_from is not None:
        model.load_state_dict(init_from)
    model.train()
    opt, sched = adamw_one_cycle(model.parameters(), lr, steps, pct_start=0.1, weight_decay=0.01)
    g = torch.Generator().manual_seed(seed)
    for step in (bar := progress(range(steps), desc=desc)):
        x, P = tok.training_batch(batch_size, g, banned, max_new_tokens)
        t = torch.rand(batch_size, 1, generator=g) * (1 - MASK_EPS) + MASK_EPS
        xt, masked = mask_tokens(x, t, tok.mask_token_id, g, keep_prefix=P)
        logits = model(input_ids=xt).logits
        if model.shift_logits:
            logits = shift_by_one(logits)
        loss = masked_diffusion_loss(logits, x, masked, t, "elbo", normalizer=batch_size * max_new_tokens)
        optimizer_step(model, opt, sched, loss, clip=1.0)
        if step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.4f}")
    return model.eval()
