"""The note's §6b diffusion variant: a class-conditional MLP DDPM on 2-D groups of different difficulty,
with the **excess** denoising loss (model loss − the analytic optimal denoiser's loss) per group.

Groups (``methods/egt.md`` §6b): A = 3 isotropic modes at x = −2 (variance 0.05, p_A = 0.9) and B = a ring
of 9 narrow modes (radius 1.5, variance 0.01) centred at (2, 0) (p_B = 0.1, the minority and the harder
law). Both are :class:`zoo.common.gmm.GaussianMixture`, so the Bayes-optimal ε-prediction
ε*_a(x_t, t) = E[ε | x_t, a] is closed form (``predict_vp``). Per sample,

    excess = ‖ε − ε_θ(x_t, t, a)‖² − ‖ε − ε*_a(x_t, t)‖²,   E[excess | x_t] = ‖ε_θ − ε*_a‖²,

so the per-group excess loss removes the irreducible per-group offset that makes raw-loss min–max
chase intrinsically hard groups (note §4.5); its held-out value E‖ε_θ − ε*_a‖² (uniform t, fixed
draws) is 0 iff the denoiser is optimal for the group: a divergence proxy (each timestep's term is,
up to the DDPM ELBO weight, a term of the KL bound; Ho et al., arXiv 2006.11239, eq. 12), **not** the
divergence itself.

θ₀ is an ERM pretraining (frequency-weighted ε-loss, Adam) of :class:`zoo.common.mlp_diffusion.VectorDiffusion`
inside the recipe (seeded, memoised per process; no shipped weights). Fine-tuning objectives: ``erm``
(frequency-weighted; its gradient is the same for raw and excess losses), ``minmax`` (EMA per
(group, timestep bin), worst group per bin, selection on ``excess`` or ``raw`` losses) and
``group-dro`` (exponentiated-gradient weights on the per-group excess losses).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import torch

from zoo.common.gmm import GaussianMixture
from zoo.common.mlp_diffusion import VectorDiffusion
from zoo.common.toys2d import ring

from .gaussian import eg_update

__all__ = ["ddpm_groups", "make_model", "group_batch", "heldout_excess", "pretrain", "DDPMRun", "finetune_ddpm"]


def ddpm_groups() -> list[GaussianMixture]:
    """[A, B]: A = 3 modes at (−2, −2), (−2, 0), (−2, 2), variance 0.05; B = 9-mode ring (radius 1.5,
    variance 0.01) centred at (2, 0)."""
    a = GaussianMixture([1.0] * 3, [[-2.0, -2.0], [-2.0, 0.0], [-2.0, 2.0]], variances=[0.05] * 3)
    r = ring(9, radius=1.5, variance=0.01)
    b = GaussianMixture(r.log_weights.exp(), r.means + torch.tensor([2.0, 0.0], dtype=torch.float64), variances=[0.01] * 9)
    return [a, b]


def make_model(T: int = 50, width: int = 64, layers: int = 3, seed: int = 0) -> VectorDiffusion:
    """The conditional DDPM (one-hot group as ``cond``), initialised from ``seed``."""
    with torch.random.fork_rng(devices=[]):  # nn.Linear init draws from the global RNG: seed it without leaking state
        torch.manual_seed(seed)
        return VectorDiffusion(2, cond_dim=2, T=T, schedule="vp", width=width, layers=layers)


def group_batch(model: VectorDiffusion, law: GaussianMixture, a: int, n: int, g: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Raw ε-loss, excess loss (raw − optimal's) and t for ``n`` draws of group ``a`` (x0, t, ε from ``g``)."""
    x0 = law.sample(n, g).float()
    t = torch.randint(0, model.T, (n,), generator=g)
    eps = torch.randn(n, 2, generator=g)
    xt = model.add_noise(x0, t, eps)
    with torch.no_grad():
        opt = law.predict_vp(xt.double(), model.alphas_cumprod.double()[t], "epsilon").float()
    cond = torch.zeros(n, 2)
    cond[:, a] = 1.0
    raw = ((model.model(xt, t, cond) - eps) ** 2).sum(1)
    return raw, raw - ((opt - eps) ** 2).sum(1), t


@torch.no_grad()
def heldout_excess(model: VectorDiffusion, groups: list[GaussianMixture], n: int = 4000, seed: int = 123) -> list[float]:
    """Per-group E‖ε_θ − ε*_a‖² on ``n`` fixed draws per group (uniform t)."""
    out = []
    g = torch.Generator().manual_seed(seed)
    for a, law in enumerate(groups):
        x0 = law.sample(n, g).float()
        t = torch.randint(0, model.T, (n,), generator=g)
        xt = model.add_noise(x0, t, torch.randn(n, 2, generator=g))
        opt = law.predict_vp(xt.double(), model.alphas_cumprod.double()[t], "epsilon").float()
        cond = torch.zeros(n, 2)
        cond[:, a] = 1.0
        out.append(float(((model.model(xt, t, cond) - opt) ** 2).sum(1).mean()))
    return out


@functools.lru_cache(maxsize=4)
def _pretrained(steps: int, lr: float, batch: int, width: int, p_b: float, seed: int) -> dict[str, torch.Tensor]:
    model = make_model(width=width, seed=seed)
    groups, p = ddpm_groups(), (1 - p_b, p_b)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        loss = sum(p[a] * group_batch(model, law, a, batch, g)[0].mean() for a, law in enumerate(groups))
        opt.zero_grad()
        loss.backward()  # type: ignore[union-attr]
        opt.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def pretrain(steps: int = 3000, lr: float = 2e-3, batch: int = 128, width: int = 64, p_b: float = 0.1, seed: int = 0) -> VectorDiffusion:
    """θ₀: ERM pretraining (Σ_a p_a × mean ε-loss of ``batch`` draws of each group per step); a fresh
    model loaded with the (memoised) result."""
    model = make_model(width=width, seed=seed)
    model.load_state_dict(_pretrained(steps, lr, batch, width, p_b, seed))
    return model


@dataclass
class DDPMRun:
    """Trace of :func:`finetune_ddpm`: per-group excess-loss EMA (mean over bins) every ``record_every`` steps."""

    steps: list[int] = field(default_factory=list)
    excess_ema: list[list[float]] = field(default_factory=list)
    worst_counts: list[int] = field(default_factory=lambda: [0, 0])
    weights: list[float] = field(default_factory=list)


def finetune_ddpm(model: VectorDiffusion, algorithm: str = "minmax", select_on: str = "excess", steps: int = 1500, lr: float = 5e-4,
                  batch: int = 128, bins: int = 5, ema_decay: float = 0.9, eta_q: float = 1.0, p_b: float = 0.1, seed: int = 1,
                  record_every: int = 50) -> DDPMRun:
    """Fine-tune ``model`` in place (module docstring); ``batch`` draws per group per step."""
    if algorithm not in ("erm", "minmax", "group-dro") or select_on not in ("excess", "raw"):
        raise ValueError(f"algorithm must be erm, minmax or group-dro and select_on excess or raw; got {algorithm!r}, {select_on!r}")
    groups, p = ddpm_groups(), (1 - p_b, p_b)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    ema: torch.Tensor | None = None
    q = torch.full((2,), 0.5, dtype=torch.float64)
    trace: torch.Tensor | None = None  # per-group EMA of the batch excess loss, for the record
    run = DDPMRun()
    for step in range(steps):
        ls = [group_batch(model, law, a, batch, g) for a, law in enumerate(groups)]
        b = [(t * bins) // model.T for _, _, t in ls]
        sel = [raw if select_on == "raw" else exc for raw, exc, _ in ls]
        cells = torch.stack([torch.stack([sel[a][b[a] == j].mean() if bool((b[a] == j).any()) else sel[a].new_tensor(float("nan"))
                                          for j in range(bins)]) for a in range(2)]).detach()
        if ema is None:
            ema = cells.clone()
        else:
            known = ~cells.isnan()
            fresh = known & ema.isnan()
            ema[fresh] = cells[fresh]
            upd = known & ~fresh
            ema[upd] = ema_decay * ema[upd] + (1 - ema_decay) * cells[upd]
        if algorithm == "erm":
            loss = sum(p[a] * ls[a][0].mean() for a in range(2))
        elif algorithm == "group-dro":
            per = torch.stack([ls[a][1].mean() for a in range(2)])
            q = eg_update(q, per, eta_q)
            loss = (q.float() * per).sum()
        else:
            terms = []
            for j in range(bins):
                col = torch.nan_to_num(ema[:, j], nan=-float("inf"))
                w = int(col.argmax())
                mask = b[w] == j
                if bool(mask.any()):
                    terms.append(ls[w][0][mask].mean())  # raw and excess have the same gradient
                    run.worst_counts[w] += 1
            loss = torch.stack(terms).mean()
        opt.zero_grad()
        loss.backward()  # type: ignore[union-attr]
        opt.step()
        cur = torch.stack([ls[a][1].detach().mean() for a in range(2)])
        trace = cur if trace is None else ema_decay * trace + (1 - ema_decay) * cur
        if (step + 1) % record_every == 0 or step + 1 == steps:
            run.steps.append(step + 1)
            run.excess_ema.append([float(v) for v in trace])
    run.weights = [float(v) for v in q]
    return run
