"""How fmrg's learned toy model is made (``zoo train fmrg [--check]``; the benchmark's ``--learned`` retrains other
seeds through the same :func:`train_pair`).

1. **Velocity** ``u_theta(x, t)`` by flow matching (Lipman et al., arXiv 2210.02747, eq. 23 with the rectified-flow
   path of Liu et al., arXiv 2209.03003): per step, fresh ``x1 ~ p_data`` (the mixture), ``x0 ~ N(0, I)``,
   ``t ~ U(0, 1)``, loss ``mean |u_theta((1 - t) x0 + t x1, t) - (x1 - x0)|^2``.
2. **Flow map** ``u_phi(x, t, s)`` distilled from the learned ODE: ``n_traj`` noise draws are integrated by
   Dormand-Prince 5(4) (rtol = atol = 1e-7) through ``dx/dt = u_theta(x, t)`` onto the grid ``t_j = j / n_grid``;
   per step, random rows and grid pairs ``i <= j``, target the mean velocity ``(x_{t_j} - x_{t_i}) / (t_j - t_i)``
   (``u_theta(x_{t_i}, t_i)`` on the diagonal ``i = j``), loss ``mean |u_phi(x_{t_i}, t_i, t_j) - target|^2``
   (flow-map matching by distillation, Boffi, Albergo & Vanden-Eijnden, arXiv 2406.07507, section 3).

Both with AdamW + one-cycle (:func:`zoo.common.training.adamw_one_cycle`), gradient clipping 1.0, float64, one CPU
thread, every random draw from one generator seeded by ``seed``: the same bytes on the same CPU kernels.
"""
from __future__ import annotations

from typing import Any

import torch

from registry.contract import trainer

from .params import TrainOptions

__all__ = ["TrainOptions", "train_learned", "train_pair"]


def train_pair(seed: int, opts: TrainOptions | None = None):
    """Train the velocity and distil the flow map (module docstring) from ``seed``; returns ``(model, history)``."""
    from zoo.common.training import adamw_one_cycle, optimizer_step, progress, setup_deterministic

    from .learned import LearnedFlowMapModel

    opts = opts or TrainOptions()
    g = setup_deterministic(seed)
    model = LearnedFlowMapModel(opts.mixture, opts.width)
    gmm, d = model.gmm, model.dim
    hist: dict[str, Any] = {}

    # 1. flow matching
    opt, sched = adamw_one_cycle(model.vel.parameters(), opts.lr, opts.vel_steps)
    it = range(opts.vel_steps)
    bar = progress(it, "fmrg velocity (flow matching)") if opts.progress else it
    losses = []
    for _ in bar:
        x1 = gmm.sample(opts.batch, generator=g)
        x0 = torch.randn(opts.batch, d, dtype=torch.float64, generator=g)
        t = torch.rand(opts.batch, 1, dtype=torch.float64, generator=g)
        loss = ((model._vel((1 - t) * x0 + t * x1, t[:, 0]) - (x1 - x0)) ** 2).sum(1).mean()
        optimizer_step(model.vel, opt, sched, loss, clip=1.0)
        losses.append(loss.item())
    hist["vel_loss_last100"] = sum(losses[-100:]) / len(losses[-100:])

    # 2. trajectories of the learned ODE on the grid, then flow-map distillation
    ts = [j / opts.n_grid for j in range(opts.n_grid + 1)]
    x = torch.randn(opts.n_traj, d, dtype=torch.float64, generator=g)
    traj = [x]
    with torch.no_grad():
        for a, b in zip(ts, ts[1:]):
            traj.append(model.ode(traj[-1], a, b))
        X = torch.stack(traj)  # (n_grid + 1, n_traj, d)
        B = torch.stack([model._vel(X[j], ts[j]) for j in range(len(ts))])
    T = torch.tensor(ts, dtype=torch.float64)
    opt, sched = adamw_one_cycle(model.fmap.parameters(), opts.lr, opts.fmap_steps)
    it = range(opts.fmap_steps)
    bar = progress(it, "fmrg flow map (distillation)") if opts.progress else it
    losses = []
    for _ in bar:
        rows = torch.randint(0, opts.n_traj, (opts.batch,), generator=g)
        ij = torch.randint(0, opts.n_grid + 1, (opts.batch, 2), generator=g)
        i, j = ij.min(1).values, ij.max(1).values
        xi, xj = X[i, rows], X[j, rows]
        ti, tj = T[i], T[j]
        diag = (i == j)[:, None]
        target = torch.where(diag, B[i, rows], (xj - xi) / (tj - ti).clamp_min(1e-12)[:, None])
        pred = model.fmap(torch.cat([xi, ti[:, None], tj[:, None]], dim=1))
        loss = ((pred - target) ** 2).sum(1).mean()
        optimizer_step(model.fmap, opt, sched, loss, clip=1.0)
        losses.append(loss.item())
    hist["fmap_loss_last100"] = sum(losses[-100:]) / len(losses[-100:])
    return model.requires_grad_(False).eval(), hist


@trainer(options=TrainOptions)
def train_learned(ctx: Any, opts: TrainOptions) -> None:
    """Train the learned velocity + flow map of seed ``ctx.seed`` (0 under ``zoo train``) into ``ctx.out_dir``."""
    from zoo.common.training import save_checkpoint

    model, hist = train_pair(ctx.seed, opts)
    print(f"final losses: velocity {hist['vel_loss_last100']:.4f}, flow map {hist['fmap_loss_last100']:.4f} (mean of the last 100 steps)")
    save_checkpoint(model, ctx.path(f"fmrg-{opts.mixture}-learned-s{ctx.seed}.safetensors"))
