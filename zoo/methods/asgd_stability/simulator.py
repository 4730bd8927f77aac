"""A vectorised simulator of asynchronous SGD and coupled runs for on-average model stability.

Paper: Xie & Lei, "Sharper Generalization Guarantees for Asynchronous SGD: Beyond Lipschitzness,
Smoothness and Data Homogeneity", ICML 2026 (poster 62429; only the abstract is public, no code).
The ASGD model and the stability framework are the standard ones the abstract names, not the
paper's exact statements (shared note ``methods/asgd.md`` §4):

* data S of N = m n samples, randomly partitioned into m shards of n;
* at server step t a worker j_t ~ participation p reports a gradient computed at a *stale*
  iterate on a sample drawn uniformly from its shard:
  ``w_{t+1} = w_t - η ∇f(w_{t-τ_t}; z_{ξ_t})`` with delays τ_t ~ an arbitrary pmf on {0..τ_max},
  clipped to τ_t <= t (delays never reference future iterates);
* on-average model stability (Lei & Ying 2020, https://arxiv.org/abs/2006.08157, Def. 4):
  ``ε² = E_{S, S', A} (1/N) Σ_i ‖A(S) - A(S^{(i)})‖²`` where S^{(i)} replaces sample i by an
  independent copy; estimated by coupled runs that share *all* randomness (partition, worker
  order, within-shard draws, delays) and differ only in sample i, for random i;
* generalisation gap ``E[F(A(S)) - F_S(A(S))]`` with F estimated on a fresh test set.

Everything is batched: one call runs ``len(seeds) x (k + 1)`` trajectories (a base run and k
perturbed runs per seed) in lock-step on one device, with a ring buffer of the last τ_max + 1
iterates for the stale reads.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import torch

Loss = Literal["logistic", "squared"]


@dataclass(frozen=True)
class Problem:
    """A data distribution and loss. ``logistic-separable``: x ~ N(0, I_d / d), y = sign(⟨w*, x⟩)
    (separable: convex, smooth, no finite minimiser); ``lsq-overparam``: x ~ N(0, I_d / d),
    y = ⟨w*, x⟩ + σ ε with d > N (convex, not strongly convex on the data span's complement);
    ``lsq-strongly-convex``: the same with d << N (strongly convex: a contrast, not the paper's regime)."""

    name: Literal["logistic-separable", "lsq-overparam", "lsq-strongly-convex"] = "logistic-separable"
    d: int = 20
    noise: float = 0.5

    @property
    def loss(self) -> Loss:
        return "logistic" if self.name.startswith("logistic") else "squared"

    def sample(self, gen: torch.Generator, n: int, w_star: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, self.d, generator=gen, dtype=w_star.dtype) / math.sqrt(self.d)
        s = x @ w_star
        if self.loss == "logistic":
            return x, torch.where(s >= 0, 1.0, -1.0).to(w_star.dtype)
        return x, s + self.noise * torch.randn(n, generator=gen, dtype=w_star.dtype)

    def smoothness(self) -> float:
        """L with ‖x‖² <= ~2 w.h.p. (x ~ N(0, I/d)): logistic L = ‖x‖²/4, squared L = ‖x‖²."""
        return 0.5 if self.loss == "logistic" else 2.0


def loss_and_grad(loss: Loss, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row loss and gradient for batched ``w`` (..., d), ``x`` (..., d), ``y`` (...)."""
    s = (w * x).sum(-1)
    if loss == "logistic":
        m = y * s
        return torch.nn.functional.softplus(-m), (-y * torch.sigmoid(-m)).unsqueeze(-1) * x
    r = s - y
    return 0.5 * r * r, r.unsqueeze(-1) * x


def mean_loss(loss: Loss, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean loss of each of R models ``w`` (R, d) on its dataset ``x`` (R, N, d), ``y`` (R, N)."""
    s = torch.einsum("rnd,rd->rn", x, w)
    if loss == "logistic":
        return torch.nn.functional.softplus(-y * s).mean(-1)
    return (0.5 * (s - y) ** 2).mean(-1)


def delay_pmf(spec: str) -> list[float]:
    """A delay distribution on {0..τ_max} from a short string: ``none``; ``fixed:τ``;
    ``uniform:τmax``; ``geometric:mean:τmax`` (truncated, renormalised); or comma-separated
    probabilities ``p0,p1,...`` (an arbitrary pmf)."""
    kind, _, rest = spec.partition(":")
    if kind == "none":
        return [1.0]
    if kind == "fixed":
        tau = int(rest)
        return [0.0] * tau + [1.0]
    if kind == "uniform":
        tau = int(rest)
        return [1.0 / (tau + 1)] * (tau + 1)
    if kind == "geometric":
        mean, tmax = rest.split(":")
        q = float(mean) / (1.0 + float(mean))
        p = [(1 - q) * q**k for k in range(int(tmax) + 1)]
        return [v / sum(p) for v in p]
    p = [float(v) for v in spec.split(",")]
    if any(v < 0 for v in p) or sum(p) <= 0:
        raise ValueError(f"delay pmf {spec!r}: expected non-negative weights")
    return [v / sum(p) for v in p]


def participation_weights(spec: str, m: int) -> list[float]:
    """Worker participation p_j: ``balanced`` (1/m each) or ``one-slow:r`` (worker m-1 reports r
    times less often, e.g. a 10x slower worker), or comma-separated weights (length m)."""
    if spec == "balanced":
        return [1.0 / m] * m
    if spec.startswith("one-slow:"):
        r = float(spec.split(":")[1])
        w = [1.0] * (m - 1) + [1.0 / r]
        return [v / sum(w) for v in w]
    w = [float(v) for v in spec.split(",")]
    if len(w) != m or any(v < 0 for v in w) or sum(w) <= 0:
        raise ValueError(f"participation {spec!r}: expected {m} non-negative weights")
    return [v / sum(w) for v in w]


@dataclass
class Schedule:
    """The randomness of one ASGD run shared by a coupled pair: partition (S, N), worker per step
    (S, T), within-shard position (S, T), delay (S, T); S = number of seeds."""

    perm: torch.Tensor
    worker: torch.Tensor
    pos: torch.Tensor
    delay: torch.Tensor

    def sample_index(self, n: int) -> torch.Tensor:
        """ξ_t = perm[worker_t * n + pos_t]: the data index each step reads (S, T)."""
        return torch.gather(self.perm, 1, self.worker * n + self.pos)


def make_schedule(gens: list[torch.Generator], N: int, m: int, T: int, pmf: list[float], part: list[float]) -> Schedule:
    """One schedule per seed generator; delays clipped to τ_t <= t."""
    if N % m:
        raise ValueError(f"N = {N} is not divisible by m = {m} (balanced shards of n = N / m)")
    n = N // m
    perms, workers, poss, delays = [], [], [], []
    p_w, p_d = torch.tensor(part, dtype=torch.float64), torch.tensor(pmf, dtype=torch.float64)
    t = torch.arange(T)
    for g in gens:
        perms.append(torch.randperm(N, generator=g))
        workers.append(torch.multinomial(p_w, T, replacement=True, generator=g))
        poss.append(torch.randint(0, n, (T,), generator=g))
        delays.append(torch.minimum(torch.multinomial(p_d, T, replacement=True, generator=g), t))
    return Schedule(torch.stack(perms), torch.stack(workers), torch.stack(poss), torch.stack(delays))


@dataclass
class StabilityResult:
    """Per-seed measurements: ``sq_dist`` (S, k) = ‖A(S) - A(S^{(i)})‖² for k random i,
    ``train`` / ``test`` (S,) losses of the base run, ``first_use`` (S, k) the first step that read
    sample i (T if never)."""

    sq_dist: torch.Tensor
    train: torch.Tensor
    test: torch.Tensor
    first_use: torch.Tensor
    config: dict = field(default_factory=dict)
    w: torch.Tensor | None = None  # (S, d) the base runs' final iterates

    @property
    def stability(self) -> float:
        """ε = sqrt(mean over seeds and i of ‖Δ‖²) (on-average model stability, not squared)."""
        return float(self.sq_dist.mean().sqrt())

    @property
    def gap(self) -> float:
        return float((self.test - self.train).mean())

    @property
    def gap_stderr(self) -> float:
        g = self.test - self.train
        return float(g.std() / math.sqrt(g.numel())) if g.numel() > 1 else float("nan")


def run_coupled(problem: Problem, *, N: int, m: int = 1, T: int | None = None, eta0: float = 0.5,
                delay: str = "none", participation: str = "balanced", seeds: list[int] | range = range(20),
                k: int = 4, n_test: int = 2048, device: str | torch.device = "cpu",
                dtype: torch.dtype = torch.float64, progress: bool = False,
                coupling: Literal["shared", "independent"] = "shared") -> StabilityResult:
    """Run ASGD on S and on k neighbouring datasets S^{(i)} per seed, all sharing the schedule.

    Step size ``η = η0 / sqrt(T)`` capped at ``1 / (L (1 + τ_max))`` (the delay condition of the
    note §9), ``T = N`` by default (one expected pass). Returns the per-seed measurements."""
    T = N if T is None else T
    pmf = delay_pmf(delay)
    tau_max = len(pmf) - 1
    eta = min(eta0 / math.sqrt(T), 1.0 / (problem.smoothness() * (1 + tau_max)))
    seeds = list(seeds)
    S = len(seeds)
    gens = [torch.Generator().manual_seed(int(s)) for s in seeds]
    d = problem.d
    xs, ys, xr, yr, idx, xt, yt = [], [], [], [], [], [], []
    for g in gens:
        w_star = torch.randn(d, generator=g, dtype=dtype)
        w_star = w_star / w_star.norm() * math.sqrt(d)
        x, y = problem.sample(g, N, w_star)
        x2, y2 = problem.sample(g, k, w_star)  # the independent replacements z'_i
        x3, y3 = problem.sample(g, n_test, w_star)
        xs.append(x), ys.append(y), xr.append(x2), yr.append(y2), xt.append(x3), yt.append(y3)
        idx.append(torch.randint(0, N, (k,), generator=g))
    part = participation_weights(participation, m)
    sched = make_schedule(gens, N, m, T, pmf, part)
    X = torch.stack(xs).to(device)  # (S, N, d)
    Y = torch.stack(ys).to(device)
    Xr, Yr, I = torch.stack(xr).to(device), torch.stack(yr).to(device), torch.stack(idx).to(device)  # (S, k, ...)
    R = k + 1  # replica 0: base run on S; replica c >= 1: S with sample I[:, c-1] replaced
    xi = sched.sample_index(N // m).unsqueeze(1).expand(S, R, T).clone()  # (S, R, T)
    delays = sched.delay.unsqueeze(1).expand(S, R, T).clone()
    if coupling == "independent":
        for c in range(1, R):
            other = make_schedule(gens, N, m, T, pmf, part)
            xi[:, c], delays[:, c] = other.sample_index(N // m), other.delay
    xi, delays = xi.to(device), delays.to(device)
    hist = torch.zeros(S, R, tau_max + 1, d, dtype=dtype, device=device)
    w = torch.zeros(S, R, d, dtype=dtype, device=device)
    ar = torch.arange(S, device=device).unsqueeze(1)
    rr = torch.arange(R, device=device).unsqueeze(0)
    first_use = torch.full((S, k), T, dtype=torch.long, device=device)
    steps = range(T)
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, desc=f"ASGD N={N} m={m}", leave=False)
    for t in steps:
        hist[:, :, t % (tau_max + 1)] = w
        j = xi[:, :, t]  # (S, R)
        x_t = X[ar, j]  # (S, R, d)
        y_t = Y[ar, j]
        hit = I == j[:, 1:]  # (S, k): this step reads the replaced sample
        if bool(hit.any()):
            x_t[:, 1:][hit] = Xr[hit]
            y_t[:, 1:][hit] = Yr[hit]
            first_use = torch.where(hit & (first_use == T), t, first_use)
        stale = hist[ar, rr, (t - delays[:, :, t]) % (tau_max + 1)]  # (S, R, d)
        _, grad = loss_and_grad(problem.loss, stale, x_t, y_t)
        w = w - eta * grad
    diff = w[:, 1:] - w[:, :1]
    train = mean_loss(problem.loss, w[:, 0], X, Y)
    test = mean_loss(problem.loss, w[:, 0], torch.stack(xt).to(device), torch.stack(yt).to(device))
    cfg = dict(problem=problem.name, d=d, N=N, m=m, n=N // m, T=T, eta=eta, delay=delay, tau_max=tau_max,
               participation=participation, seeds=S, k=k)
    return StabilityResult((diff * diff).sum(-1).cpu(), train.cpu(), test.cpu(), first_use.cpu(), cfg, w[:, 0].cpu())


def sgd_reference(problem: Problem, x: torch.Tensor, y: torch.Tensor, order: torch.Tensor, eta: float) -> torch.Tensor:
    """Plain sequential SGD ``w_{t+1} = w_t - η ∇f(w_t; z_{order_t})`` from w_0 = 0, one sample
    at a time (the brute-force reference for m = 1, τ ≡ 0)."""
    w = torch.zeros(x.shape[1], dtype=x.dtype)
    for j in order.tolist():
        _, g = loss_and_grad(problem.loss, w, x[j], y[j])
        w = w - eta * g
    return w


def log_log_slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log y on log x."""
    lx = torch.tensor([math.log(v) for v in xs], dtype=torch.float64)
    ly = torch.tensor([math.log(v) for v in ys], dtype=torch.float64)
    lx = lx - lx.mean()
    return float((lx * (ly - ly.mean())).sum() / (lx * lx).sum())
