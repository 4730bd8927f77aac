"""How PoE-Bridge's shipped CPU checkpoints are made (``zoo train poe-bridge [--check] [--only ENTRY]``).

Three recipes, one per model pair (the ``training:`` entries of ``specs/poe-bridge.yaml``); one thread, fixed
seeds, the same bytes on every run on the same CPU kernels:

* :func:`train_toy` (``toy``): the AR target, a tiny ``Qwen2ForCausalLM`` (next-token cross-entropy on the answer,
  :func:`~.training.train_ar_qwen2`), and the proposal, a tiny torch-encoder masked-diffusion LM
  (:func:`train_encoder_dlm`, the MDLM/LLaDA objective: Sahoo et al. 2024, arXiv 2406.07524; Nie et al. 2025,
  arXiv 2502.09992), on the step-by-step 3-digit addition of :mod:`zoo.common.toy_text`. The DLM gets the smaller
  budget on purpose: like Dream-7B against Qwen2.5-Math-7B in the paper, the proposal is the weaker model. The files
  are also the toy models of the baseline specs ``ar-decoding`` and ``dlm-confidence-decoding``.
* :func:`train_equal` (``toy-equal``): a bidirectional Qwen2 proposal of exactly the AR target's width and depth
  (:func:`~.training.train_dlm_qwen2`); its AR target is the ``toy`` pair's.
* :func:`train_long` (``toy-long``, issue 40 item 2): column-interleaved addition of 31-digit numbers
  (:mod:`.columns`, 63-token answers): an AR target and a proposal of its size initialised from the trained AR with
  Dream's shift-by-one read-out, as Dream-7B is from Qwen2.5-7B.

Seeds: ``ctx.seed`` (0 under ``zoo train``, the shipped files) seeds the global RNG and the AR's data; the DLM's
data come from ``ctx.seed + 1`` (the toy-equal and toy-long DLMs) as when the files were made.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch

from registry.contract import trainer

from .params import EqualOptions, LongOptions, PairOptions, ScheduleOptions  # noqa: F401

MAX_NEW = 40  # the toy pair's answer region (33-token answers + EOS padding)
LONG_FILES = ("poe-bridge-long-ar.safetensors", "poe-bridge-long-dlm.safetensors")  # what train_long writes


def train_encoder_dlm(steps: int, batch_size: int, lr: float, digits: int, seed: int) -> torch.nn.Module:
    """The ``toy`` proposal (:func:`~.toy.build_dlm`, a torch encoder) trained with the masked-diffusion ELBO: each
    answer-region token is masked with probability ``t ~ U(1e-3, 1)``, cross-entropy on masked positions weighted by
    ``1/t``; data from a generator seeded ``seed + 1``, never the 256 held-out problems."""
    from zoo.common.toy_text import ArithTokenizer, eval_problems, training_batch
    from zoo.common.training import adamw_one_cycle, optimizer_step, progress

    from .toy import build_dlm

    tok = ArithTokenizer(digits)
    banned = {(e.a, e.b) for e in eval_problems(256, digits)}
    model = build_dlm(digits=digits).train()
    opt, sched = adamw_one_cycle(model.parameters(), lr, steps, pct_start=0.1, weight_decay=0.01)
    g = torch.Generator().manual_seed(seed + 1)
    eps = 1e-3
    for step in (bar := progress(range(steps), desc="DLM")):
        x, P = training_batch(tok, batch_size, g, digits, banned, MAX_NEW)
        t = torch.rand(batch_size, 1, generator=g) * (1 - eps) + eps
        m = torch.rand(x.shape, generator=g) < t
        m[:, :P] = False
        xt = torch.where(m, torch.full_like(x, tok.mask_token_id), x)
        logits = model(xt)
        ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), x, reduction="none")
        loss = ((ce * m) / t).sum() / (batch_size * MAX_NEW)
        optimizer_step(model, opt, sched, loss, clip=1.0)
        if step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.4f}")
    return model.eval()


def _save(ctx: Any, model: torch.nn.Module, name: str, t0: float, c0: float) -> None:
    from zoo.common.training import save_checkpoint

    h = save_checkpoint(model, ctx.path(name), quiet=True)
    print(f"{name}: {time.thread_time() - c0:.1f} CPU s ({time.time() - t0:.1f} s wall) sha256 {h}")


@trainer(options=PairOptions)
def train_toy(ctx: Any, opts: PairOptions) -> None:
    """The ``toy`` pair: the Qwen2 AR target, then the torch-encoder DLM, in that order from one seeded global RNG."""
    from zoo.common.training import setup_deterministic

    from .training import train_ar_qwen2

    setup_deterministic(ctx.seed)
    t0, c0 = time.time(), time.thread_time()
    _save(ctx, train_ar_qwen2(opts.ar_steps, opts.batch_size, opts.lr, opts.digits, ctx.seed), "poe-bridge-ar.safetensors", t0, c0)
    t0, c0 = time.time(), time.thread_time()
    _save(ctx, train_encoder_dlm(opts.dlm_steps, opts.batch_size, opts.lr, opts.digits, ctx.seed),
          "poe-bridge-dlm.safetensors", t0, c0)


@trainer(options=EqualOptions)
def train_equal(ctx: Any, opts: EqualOptions) -> None:
    """The ``toy-equal`` proposal: a bidirectional Qwen2 of the AR target's size (full state dict, tied head included,
    so the loader reads it strictly); initialised and fed from seed ``ctx.seed + 1``."""
    from zoo.common.training import setup_deterministic

    from .training import train_dlm_qwen2

    seed = ctx.seed + 1
    setup_deterministic(seed)
    t0, c0 = time.time(), time.thread_time()
    _save(ctx, train_dlm_qwen2(opts.steps, opts.batch_size, opts.lr, opts.digits, seed),
          "poe-bridge-dlm-qwen2.safetensors", t0, c0)


@trainer(options=LongOptions)
def train_long(ctx: Any, opts: LongOptions) -> None:
    """The ``toy-long`` pair: the AR target (both networks initialised from ``ctx.seed``, AR data from ``ctx.seed``),
    then the DLM (data from ``ctx.seed + 1``) started from the AR file just written."""
    from safetensors.torch import load_file

    from .training import train_ar_qwen2, train_dlm_qwen2

    torch.set_num_threads(1)
    arch = {"task": "columns", "max_new_tokens": opts.max_new_tokens,
            "max_position_embeddings": opts.max_position_embeddings, "init_seed": ctx.seed}
    ar_name, dlm_name = LONG_FILES
    t0, c0 = time.time(), time.thread_time()
    _save(ctx, train_ar_qwen2(opts.ar_steps, opts.batch_size, opts.lr, opts.digits, ctx.seed, curriculum=opts.ar_curriculum,
                              curriculum_start=opts.curriculum_start, **arch), ar_name, t0, c0)
    t0, c0 = time.time(), time.thread_time()
    init = load_file(str(ctx.path(ar_name))) if opts.dlm_init == "ar" else None
    model = train_dlm_qwen2(opts.dlm_steps, opts.batch_size, opts.lr, opts.digits, ctx.seed + 1, init_from=init,
                            shift_logits=opts.dlm_init == "ar", **arch)
    _save(ctx, model, dlm_name, t0, c0)


class SeedRun:
    """What a trainer reads of a context, for another training seed: ``seed`` and ``path(name)``, the latter inside
    ``folder`` of ``ctx``'s output folder (the engine's :meth:`~registry.context.Context.path`)."""

    def __init__(self, ctx: Any, seed: int, folder: str):
        self.ctx, self.seed, self.folder, self.spec = ctx, seed, folder, ctx.spec

    def path(self, name: str) -> Path:
        return self.ctx.path(f"{self.folder}/{name}")


def train_long_seed(ctx: Any, seed: int, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``toy-long`` pair of training seed ``seed``, made by :func:`train_long` with the spec's recipe (its
    ``training.toy-long.params``, updated by ``overrides``: :class:`~.params.LongOptions` fields) into
    ``toy-long-seed<N>/`` of ``ctx``'s output folder; reused when both files and a ``recipe.json`` equal to this
    recipe are already there (a re-run with the same ``--out-dir``). Returns the recipe, the two paths and their
    sha256."""
    from registry.weights import sha256_file

    opts = LongOptions(**{**ctx.spec.training["toy-long"].params, **(overrides or {})})
    run = SeedRun(ctx, seed, f"toy-long-seed{seed}")
    recipe = {"seed": seed, **opts.model_dump()}
    paths = [run.path(n) for n in LONG_FILES]
    meta = run.path("recipe.json")
    fresh = not (all(p.is_file() for p in paths) and meta.is_file() and json.loads(meta.read_text()) == recipe)
    if fresh:
        train_long(run, opts)
        meta.write_text(json.dumps(recipe, sort_keys=True) + "\n")
    return {"recipe": recipe, "trained": fresh, "paths": {"target": paths[0], "proposal": paths[1]},
            "sha256": {"target": sha256_file(paths[0]), "proposal": sha256_file(paths[1])}}
