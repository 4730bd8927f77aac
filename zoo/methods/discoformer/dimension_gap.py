"""Issue 38 item 5: does DiScoFormer's margin over Scott-rule KDE grow with dimension at fixed n? Per-mixture score
errors of the shipped d = 1 (toy-d1) and d = 2 (toy) models and KDE on the benchmark's own held-out draws (the
generator of :func:`.evaluation.compare`, so the pooled means equal ``zoo bench discoformer``'s table), with a
bootstrap over mixtures (2000 resamples, seed 7) of the KDE / DiScoFormer pooled-error ratio.
Run: ``python -m zoo.methods.discoformer.dimension_gap 64 256 1024`` (~35 s on one CPU thread; writes JSON to stdout's
last line)."""
from __future__ import annotations

import json
import sys
import time

import torch

import zoo

from .evaluation import EVAL_SEED, _model_fn, random_gmm
from .kde import kde_log_density_score
from .benchmark import VARIANT

__all__ = ["main"]


def main(argv=None):
    ns = [int(a) for a in (sys.argv[1:] if argv is None else argv)] or [64, 256, 1024]
    tasks, nq = 48, 256
    out = {}
    t0 = time.time()
    for d in (1, 2):
        model = zoo.load("discoformer", variant=VARIANT[d]).models["estimator"]
        fn = _model_fn(model)
        for n in ns:
            g = torch.Generator().manual_seed(EVAL_SEED + 1000 * d + n)  # as compare(seed=EVAL_SEED)
            rows = []
            for _ in range(tasks):
                law = random_gmm(d, g)
                X, Y = law.sample(n, g), law.sample(nq, g)
                sc = law.score(Y, 0.0)
                _, S = fn(X, Y); _, Sk = kde_log_density_score(X, Y)
                rows.append((float(((S - sc) ** 2).sum()), float(((Sk - sc) ** 2).sum()), float((sc ** 2).sum())))
            a = torch.tensor(rows, dtype=torch.float64)
            pooled = lambda w: ((a[:, 0] * w).sum() / (a[:, 2] * w).sum(), (a[:, 1] * w).sum() / (a[:, 2] * w).sum())
            dsf, kde = (float(x) for x in pooled(torch.ones(tasks, dtype=torch.float64)))
            gb = torch.Generator().manual_seed(7)
            rat = []
            for _ in range(2000):
                w = torch.bincount(torch.randint(0, tasks, (tasks,), generator=gb), minlength=tasks).double()
                p, q = pooled(w); rat.append(float(q / p))
            rat = torch.tensor(rat).sort().values
            per = a[:, 1] / a[:, 2] - a[:, 0] / a[:, 2]  # per-mixture KDE - DSF relative error
            out[f"d{d}_n{n}"] = {"dsf": dsf, "kde": kde, "ratio": kde / dsf, "ratio_ci95": [float(rat[50]), float(rat[1949])],
                                 "dsf_wins": int((a[:, 0] < a[:, 1]).sum()), "tasks": tasks,
                                 "per_mixture_diff_mean": float(per.mean()), "per_mixture_diff_sd": float(per.std())}
            print(f"d={d} n={n}: DSF {dsf:.4f} KDE {kde:.4f} ratio {kde/dsf:.2f} (95% bootstrap over mixtures {rat[50]:.2f}-{rat[1949]:.2f}), "
                  f"DSF better on {out[f'd{d}_n{n}']['dsf_wins']}/{tasks}; per-mixture rel. error KDE-DSF {per.mean():.3f} +- {per.std():.3f} sd  [{time.time()-t0:.0f}s]", flush=True)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
