"""The chain-task comparison of LoFlexMDM and FlexMDM over several training seeds (issue 37, item 1), called by the
benchmark (``zoo bench loflexmdm``, ``--chain-seeds``).

* Models: training seed 0 is the specs' shipped ``toy-chain`` weights; any other seed is trained by
  :func:`~zoo.methods.loflexmdm.training.train_toy` with the shipped recipe (both methods, same generator, same
  steps and batch) and cached under ``$ZOO_CACHE_DIR/artifacts/loflexmdm`` (a safetensors state dict keyed by
  method, task, seed, recipe and torch version), so a second run does not retrain.
* Per seed and step budget: validity of ``samples`` fresh unconditional draws (plain sampler for both methods;
  LoFlexMDM's paper sampler too) with the error split of :func:`~.metrics.chain_error_split`, and φ's
  multipliers by distance from the end (:func:`~.metrics.chain_schedule`) and the finite differences of the
  trained generator's loss in φ's multipliers at the leaf vs the determined tokens
  (:func:`~.metrics.reward_finite_differences`: which order the reward prefers).
* Bayes references ("ceilings", :func:`~.metrics.bayes_validity`): the exact-posterior generator under FlexMDM's
  linear schedule, under the planted ``leaf-first`` order and its mirror ``root-first``, and under each seed's
  *learned* φ (what the order φ found gives a perfectly trained generator, apart from how well θ was trained).
  They are not upper bounds on a trained generator (a sharper-than-posterior one conflicts less).
* Gap summary per step budget: each arm's mean ± sd over the training seeds, the difference of the means with its
  SE from that training-seed spread (``gap_se_seeds``), whether every seed of one arm beats every seed of the other
  (``separated``), and the per-seed gaps (seed ``s`` of one arm against seed ``s`` of the other) with their sampling
  SE; the two arms' draws are independent (unconditional generation has no shared items to pair on).
"""
from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Callable
from typing import Any

import torch

from .metrics import bayes_validity, chain_schedule, evaluate, phi_schedule, planted_schedule, reward_finite_differences
from .sampler import SamplerConfig
from .tasks import Task
from .training import METHODS, RECIPE, train_toy

__all__ = ["chain_model", "chain_comparison", "gap_summary"]

TASK = "chain"
VARIANT = "toy-chain"


def chain_model(method: str, seed: int, shipped: Callable[[str, str], Any]) -> Any:
    """The chain-task model of ``method`` (``loflexmdm`` / ``flexmdm``) for training seed ``seed``: the spec's shipped
    weights for seed 0 (``shipped(method, VARIANT)``, the benchmark's loader of a spec's built model), else trained
    with the shipped recipe and cached."""
    if seed == 0:
        return shipped(method, VARIANT)
    from registry.contract import cached_artifact

    from .model import make_model

    def produce() -> dict[str, torch.Tensor]:
        print(f"  training {method} on {TASK}, seed {seed} (cached afterwards)", file=sys.stderr)
        return {k: v.detach().contiguous().clone() for k, v in train_toy(method, TASK, seed, **RECIPE).state_dict().items()}

    state = cached_artifact(["loflexmdm-train", 1, method, TASK, seed, RECIPE, torch.__version__], produce, "safetensors",
                            namespace="loflexmdm")
    model = make_model(init_seed=seed, task=TASK, schedule=METHODS[method], insertion_head=RECIPE["insertion_head"],
                       length_conditioning=RECIPE["length_conditioning"])
    model.load_state_dict(state)
    return model.eval()


def gap_summary(rows: list[dict[str, Any]], seeds: list[int], a: str = "LoFlexMDM plain", b: str = "FlexMDM plain") -> list[dict[str, Any]]:
    """Per step budget: the per-seed validity gap ``a − b`` with its SE, and the mean / sd / range over the seeds."""
    out = []
    for steps in sorted({r["steps"] for r in rows if r.get("method") == a}):
        per = []
        for s in seeds:
            ra = next(r for r in rows if r.get("method") == a and r["steps"] == steps and r["train_seed"] == s)
            rb = next(r for r in rows if r.get("method") == b and r["steps"] == steps and r["train_seed"] == s)
            per.append({"train_seed": s, "a": ra["validity"], "b": rb["validity"], "gap": ra["validity"] - rb["validity"],
                        "se": math.hypot(ra["validity_se"], rb["validity_se"])})
        gaps = [p["gap"] for p in per]
        va, vb = [p["a"] for p in per], [p["b"] for p in per]
        sd = lambda x: statistics.stdev(x) if len(x) > 1 else float("nan")  # noqa: E731
        n = len(per)
        out.append({"steps": steps, "per_seed": per, "gap_mean": statistics.fmean(gaps), "gap_sd": sd(gaps),
                    "gap_min": min(gaps), "gap_max": max(gaps), "a_mean": statistics.fmean(va), "a_sd": sd(va),
                    "b_mean": statistics.fmean(vb), "b_sd": sd(vb), "sampling_se": statistics.fmean(p["se"] for p in per),
                    # SE of the difference of the two arms' seed means (training-seed spread, both arms)
                    "gap_se_seeds": math.sqrt((sd(va) ** 2 + sd(vb) ** 2) / n) if n > 1 else float("nan"),
                    "separated": min(va) > max(vb) or max(va) < min(vb)})
    return out


def chain_comparison(seeds: list[int], samples: int, steps: list[int], bayes_samples: int, shipped: Callable[[str, str], Any],
                     seed: int = 0, bayes_steps: list[int] | None = None, fd_samples: int = 4096) -> dict[str, Any]:
    """Every chain-task number of the benchmark (rows, φ's schedules, ceilings, gap summary); see the module
    docstring. ``shipped(spec, variant)`` returns a spec's built model (training seed 0); ``seed`` seeds the sampler
    (the same for every model)."""
    task = Task(TASK)
    rows: list[dict[str, Any]] = []
    schedules: dict[str, Any] = {}
    learned: dict[int, dict[str, list[float]]] = {}
    for s in seeds:
        models = {m: chain_model(m, s, shipped) for m in METHODS}
        schedules[str(s)] = chain_schedule(models["loflexmdm"], 2048, seed)
        schedules[str(s)]["reward_fd"] = reward_finite_differences(models["loflexmdm"], fd_samples, 12, 0.5, seed)
        learned[s] = phi_schedule(models["loflexmdm"], task)
        for label, model, kw in (("FlexMDM plain", models["flexmdm"], dict(confidence=None, top_p=1.0)),
                                 ("LoFlexMDM plain", models["loflexmdm"], dict(confidence=None, top_p=1.0)),
                                 ("LoFlexMDM paper (top_prob, p=0.5)", models["loflexmdm"], dict(confidence="top_prob", top_p=0.5))):
            for n_steps in steps:
                r = evaluate(model, samples, SamplerConfig(max_steps=n_steps, **kw), seed)
                r.update(task=TASK, method=label, train_seed=s)
                rows.append(r)
                print(f"  chain seed {s} {label} {n_steps}: validity {r['validity']:.3f} (missing {r['missing_only']:.3f}, "
                      f"conflict {r['conflict']:.3f})", file=sys.stderr)
    ceilings = []
    plans = [("Bayes, linear (FlexMDM)", planted_schedule(task, "linear")),
             ("Bayes, leaf-first (b 30 / 1.01)", planted_schedule(task, "leaf-first")),
             ("Bayes, root-first (b 30 / 1.01)", planted_schedule(task, "root-first"))]
    plans += [(f"Bayes, learned phi (seed {s})", learned[s]) for s in seeds]
    for label, sched in plans:
        for n_steps in bayes_steps if bayes_steps is not None else steps:
            r = bayes_validity(task, sched, bayes_samples, SamplerConfig(max_steps=n_steps), seed)
            r.update(task=TASK, method=label)
            ceilings.append(r)
            print(f"  chain {label} {n_steps}: validity {r['validity']:.3f}", file=sys.stderr)
    return {"seeds": seeds, "rows": rows, "schedules": schedules, "ceilings": ceilings, "gaps": gap_summary(rows, seeds)}
