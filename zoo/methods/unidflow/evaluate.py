"""Rule-checked evaluation of a UniDFlow toy model (exact rules of :mod:`.world`), shared by the metric
checks, the benchmark and the training script's summary.

* caption accuracy: understanding (greedy) on all 348 scenes, exact match of the 3 caption tokens;
* generation faithfulness: ``per_caption`` samples (temperature 1) for each of the 36 captions, the fraction
  that parse to a scene with that caption; *diversity*: mean over captions of the number of distinct
  faithful images (a caption has 6-21 valid images, 3 backgrounds x positions in its bucket);
* editing correctness: greedy recolouring of every scene to each non-background colour (1,044 edits);
* preference margin: the mean surrogate-ELBO margin ``ℓ(w) − ℓ(l)`` on fixed held pairs (t and mask shared).

The sampled rates (generation at temperature 1; the random unmasking order of the greedy understanding; the
drawn pairs, ``t`` and masks of the margin) move with the seed by several times the spec's tolerances for one
draw, so the spec's numbers are :func:`over_seeds` means (the metric checks and the benchmark share it).
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import torch

from .dfm import corrupt, dfm_sample, elbo, target_mask
from .world import LAYOUT, TASKS, TOK, all_captions, all_scenes, caption_of, edit_target, encode, faithful, render

__all__ = ["caption_accuracy", "generation", "editing", "preference_margin", "evaluate_all", "over_seeds"]


def over_seeds(fn: Callable[[int], dict[str, float]], seeds: Sequence[int]) -> dict[str, float]:
    """Mean of each value of ``fn(seed)`` over ``seeds`` and its standard error (key ``"<name>_se"``: the sample
    standard deviation over the seeds / sqrt(len(seeds)); NaN for a single seed)."""
    per = [fn(s) for s in seeds]
    if not per:
        raise ValueError("over_seeds: seeds is empty (expected at least one seed)")
    out: dict[str, float] = {}
    for k in per[0]:
        xs = [float(p[k]) for p in per]
        m = sum(xs) / len(xs)
        out[k] = m
        out[k + "_se"] = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs)) if len(xs) > 1 else math.nan
    return out


def _chunks(rows: list, size: int = 256):
    for i in range(0, len(rows), size):
        yield rows[i:i + size]


@torch.no_grad()
def caption_accuracy(model, steps: int = 3, temperature: float = 0.0, seed: int = 0, alpha=None) -> float:
    g = torch.Generator().manual_seed(seed)
    scenes = all_scenes()
    ok = 0
    for chunk in _chunks(scenes):
        cond = torch.tensor([encode("und", image=render(s)) for s in chunk])
        out = dfm_sample(model, cond, "und", steps, temperature, g, alpha=alpha)
        ok += sum(out[i, LAYOUT.text].tolist() == caption_of(s) for i, s in enumerate(chunk))
    return ok / len(scenes)


@torch.no_grad()
def generation(model, per_caption: int = 16, steps: int = 16, temperature: float = 1.0, seed: int = 0, alpha=None) -> dict[str, float]:
    g = torch.Generator().manual_seed(seed)
    caps = [[TOK.colour_ids[c], TOK.size_ids[s], TOK.bucket_ids[b]] for c, s, b in all_captions()]
    rows = [c for c in caps for _ in range(per_caption)]
    imgs = []
    for chunk in _chunks(rows):
        cond = torch.tensor([encode("gen", text=c) for c in chunk])
        imgs += dfm_sample(model, cond, "gen", steps, temperature, g, alpha=alpha)[:, LAYOUT.image].tolist()
    ok = [faithful(c, im) for c, im in zip(rows, imgs)]
    distinct = []
    for k in range(len(caps)):
        sl = slice(k * per_caption, (k + 1) * per_caption)
        distinct.append(len({tuple(im) for im, o in zip(imgs[sl], ok[sl]) if o}))
    return {"faithfulness": sum(ok) / len(ok), "diversity": sum(distinct) / len(distinct)}


@torch.no_grad()
def editing(model, steps: int = 16, temperature: float = 0.0, seed: int = 0, alpha=None) -> float:
    g = torch.Generator().manual_seed(seed)
    jobs = [(s, c) for s in all_scenes() for c in range(4) if c != s.bg]
    ok = 0
    for chunk in _chunks(jobs):
        cond = torch.tensor([encode("edit", instr=TOK.colour_ids[c], source=render(s)) for s, c in chunk])
        out = dfm_sample(model, cond, "edit", steps, temperature, g, alpha=alpha)
        ok += sum(out[i, LAYOUT.image].tolist() == render(edit_target(s, c)) for i, (s, c) in enumerate(chunk))
    return ok / len(jobs)


@torch.no_grad()
def preference_margin(model, n: int = 512, seed: int = 1234, alpha=None) -> float:
    """Mean ``ℓ(w|c) − ℓ(l|c)`` (nats) over ``n`` held pairs with shared ``t`` and mask (fixed by ``seed``)."""
    from .training import preference_batch

    g = torch.Generator().manual_seed(seed)
    w, l = preference_batch(n, g)
    t = torch.rand(n, generator=g).clamp(max=0.95)
    _, masked = corrupt(w, target_mask(["gen"] * n), t, g)
    task = torch.full((n,), TASKS.index("gen"))
    return float((elbo(model, w, task, t, masked, alpha) - elbo(model, l, task, t, masked, alpha)).mean())


def evaluate_all(model, per_caption: int = 16, seed: int = 0) -> dict[str, float]:
    gen = generation(model, per_caption, seed=seed)
    return {"caption_accuracy": caption_accuracy(model, seed=seed), "faithfulness": gen["faithfulness"], "diversity": gen["diversity"],
            "edit_accuracy": editing(model, seed=seed), "preference_margin": preference_margin(model)}
