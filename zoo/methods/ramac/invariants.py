"""Named property checks for ``ramac`` (run by the conformance harness under Hypothesis).

Sources: the method note ``methods/ramac.md`` sec. 7 and 9; CVaR closed forms (Rockafellar & Uryasev,
J. Risk 2000); the quantile (pinball) loss (Koenker & Bassett, Econometrica 1978); the quantile Huber
loss and IQN (Dabney et al., arXiv 1710.10044, 1806.06923). Every check is exact (algebraic, bitwise or
a deterministic optimisation on a stratified N(0, 1) sample), except ``cvar-estimator-matches-closed-form``,
whose false-fail rate is stated in its docstring. Each carries a negative control that a plausible wrong
implementation fails.
"""
from __future__ import annotations

import copy
import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.contract import invariant

from .bandit import RISKY_LAW, SAFE_LAW
from .nets import DiffusionActor, DoubleIQN, soft_update
from .risk import (
    cvar_lower_tail,
    cvar_normal,
    cvar_normal_mixture,
    fit_free_quantiles,
    huber_quantile_normal,
    normal_quantile,
    pinball_loss,
    quantile_huber_loss,
    sample_taus,
    stratified_normal,
)
from .train import TrainConfig, actor_loss

_SEEDS = st.integers(0, 2**31 - 1)
_FAST = settings(max_examples=10, deadline=None)


@invariant("cvar-estimator-exact-properties")
@_FAST
@given(_SEEDS, st.integers(1, 300), st.floats(-50, 50), st.floats(0.1, 10.0))
def cvar_estimator_exact_properties(seed: int, n: int, shift: float, scale: float) -> None:
    """Empirical CVaR_alpha (mean of the worst ceil(alpha n)): <= the mean; non-decreasing in alpha;
    CVaR_1 = mean; CVaR(X + c) = CVaR(X) + c; CVaR(cX) = c CVaR(X) for c > 0; permutation invariant
    (float64, 1e-9 relative). Negative control: the *upper*-tail mean (a sign slip) exceeds the mean."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dtype=torch.float64, generator=g) * 3 + torch.rand(n, dtype=torch.float64, generator=g)
    tol = lambda v: 1e-9 * (1 + abs(v))  # noqa: E731
    m = float(x.mean())
    alphas = [0.01, 0.05, 0.1, 0.25, 0.5, 0.9, 1.0]
    cv = [float(cvar_lower_tail(x, a)) for a in alphas]
    assert all(c <= m + tol(m) for c in cv)
    assert all(b >= a - tol(a) for a, b in zip(cv, cv[1:]))
    assert abs(cv[-1] - m) <= tol(m)
    for a, c in zip(alphas, cv):
        assert abs(float(cvar_lower_tail(x + shift, a)) - (c + shift)) <= 1e-9 * (1 + abs(c) + abs(shift))
        assert abs(float(cvar_lower_tail(scale * x, a)) - scale * c) <= 1e-9 * (1 + abs(scale * c))
        perm = torch.randperm(n, generator=g)
        assert float(cvar_lower_tail(x[perm], a)) == c
    if n >= 10 and float(x.std()) > 0:
        upper = float(-cvar_lower_tail(-x, 0.1))
        assert upper > m, "negative control: the upper-tail mean must exceed the mean"


@invariant("cvar-estimator-matches-closed-form")
@settings(max_examples=5, deadline=None)
@given(_SEEDS, st.floats(-10, 10), st.floats(0.2, 5.0), st.sampled_from([0.05, 0.1, 0.25]))
def cvar_estimator_matches_closed_form(seed: int, mu: float, sigma: float, alpha: float) -> None:
    """On 200,000 draws of N(mu, sigma^2) the empirical CVaR_alpha is within 0.03 sigma of
    ``mu - sigma phi(z_alpha)/alpha`` (its standard error is <= 0.007 sigma at alpha = 0.05: a 4-s.e.
    band, false-fail rate < 1e-4 per example); the same for the risky arm's mixture 0.8 N(9, 0.25) +
    0.2 N(-8, 1) against the mixture closed form (CVaR_0.1 = -8.80; tolerance 0.05), and the note's safe
    arm (4.12). Negative control: the closed form with the *upper* tail (mu + sigma phi/alpha) is off by
    > 1 sigma."""
    g = torch.Generator().manual_seed(seed)
    x = mu + sigma * torch.randn(200_000, dtype=torch.float64, generator=g)
    closed = cvar_normal(mu, sigma, alpha)
    emp = float(cvar_lower_tail(x, alpha))
    assert abs(emp - closed) <= 0.03 * sigma, (emp, closed)
    assert abs(emp - (mu + sigma * math.exp(-0.5 * normal_quantile(alpha) ** 2) / math.sqrt(2 * math.pi) / alpha)) > sigma
    w, m, s = RISKY_LAW
    comp = (torch.rand(200_000, generator=g) < 0.8).double()
    z = torch.randn(200_000, dtype=torch.float64, generator=g)
    y = comp * (9 + 0.5 * z) + (1 - comp) * (-8 + z)
    assert abs(float(cvar_lower_tail(y, 0.1)) - cvar_normal_mixture(0.1, w, m, s)) <= 0.05
    assert abs(cvar_normal_mixture(0.1, w, m, s) - (-8.80)) < 0.01
    assert abs(cvar_normal_mixture(0.1, *SAFE_LAW) - cvar_normal(5, 0.5, 0.1)) < 1e-9
    assert abs(cvar_normal(5, 0.5, 0.1) - 4.123) < 1e-3


@invariant("pinball-loss-properties")
@_FAST
@given(_SEEDS, st.integers(5, 200), st.floats(0.02, 0.98), st.floats(0.0, 3.0))
def pinball_loss_properties(seed: int, n: int, tau: float, kappa: float) -> None:
    """Pinball and quantile-Huber losses are >= 0 and 0 iff prediction == target; the pinball loss
    equals the kappa -> 0 quantile Huber loss; the empirical tau-quantile (order statistic ceil(tau n))
    minimises the mean pinball loss over every sample point and 200 random candidates (brute force).
    Negative control: weighting by 1 - tau (a flipped indicator) is minimised at the (1 - tau)-quantile,
    which is strictly worse for the tau-loss whenever the two order statistics differ."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randn(n, dtype=torch.float64, generator=g)
    pred = torch.randn(n, dtype=torch.float64, generator=g)
    t = torch.full((n,), tau, dtype=torch.float64)
    assert bool((pinball_loss(pred, y, t) >= 0).all())
    assert float(pinball_loss(y, y, t).abs().max()) == 0.0
    assert bool((pinball_loss(pred, y, t)[pred != y] > 0).all())
    qh = quantile_huber_loss(pred[None], t[None, :1].expand(1, n), y[None], kappa)
    assert float(qh) >= 0
    assert float(quantile_huber_loss(y[None, :1], t[None, :1], y[None, :1], kappa)) == 0.0
    # kappa -> 0: the (1/kappa-scaled) Huber loss tends to |d|, so the loss tends to the pinball loss
    cur = pred[None, :3]
    pin = pinball_loss(cur[0][:, None], y[None, :], tau).sum(1).mean()
    assert abs(float(quantile_huber_loss(cur, t[None, :3], y[None], 0.0)) - float(pin)) <= 1e-9 * (1 + float(pin))
    assert abs(float(quantile_huber_loss(cur, t[None, :3], y[None], 1e-7)) - float(pin)) <= 1e-5 * (1 + float(pin))
    # the order statistic minimises the empirical pinball risk
    ys = torch.sort(y).values
    q_star = ys[max(0, math.ceil(tau * n) - 1)]
    risk = lambda q: float(pinball_loss(torch.full((n,), float(q), dtype=torch.float64), y, t).mean())  # noqa: E731
    best = risk(q_star)
    cands = torch.cat([ys, torch.randn(200, dtype=torch.float64, generator=g) * 2])
    assert all(best <= risk(c) + 1e-12 for c in cands)
    q_flip = ys[max(0, math.ceil((1 - tau) * n) - 1)]
    if abs(float(q_flip - q_star)) > 1e-12 and abs(tau - 0.5) > 1 / n:
        assert risk(q_flip) > best


_LEVELS = (0.05, 0.1, 0.5, 0.9)


@invariant("quantile-fit-recovers-known-quantiles")
@settings(max_examples=1, deadline=None)
@given(st.just(0))
def quantile_fit_recovers_known_quantiles(_: int) -> None:
    """A free quantile vector at levels (0.05, 0.1, 0.5, 0.9), fitted by Adam on a stratified N(0, 1)
    sample (2048 points, deterministic), recovers: with the pure pinball loss (kappa = 0) the true
    quantiles (-1.645, -1.282, 0, 1.282) within 0.02; with the standard quantile-Huber pairing at
    kappa = 1 the *Huber-shrunk* quantiles this module computes in closed form
    (:func:`huber_quantile_normal`: -1.309, -0.993, 0, 0.993) within 0.02 -- and then q(0.1) is more than
    0.25 above the true -1.282; negative control: the released RADAC pairing (weights taken along the
    target axis) collapses every level to the median (all within 0.05 of 0, spread < 0.05)."""
    grid = stratified_normal(2048)
    sample = lambda b, g: grid  # noqa: E731
    true = torch.tensor([normal_quantile(t) for t in _LEVELS], dtype=torch.float64)
    shrunk = torch.tensor([huber_quantile_normal(t, 1.0) for t in _LEVELS], dtype=torch.float64)
    q_pin = fit_free_quantiles(_LEVELS, sample, kappa=0.0, steps=300)
    assert float((q_pin - true).abs().max()) < 0.02, q_pin
    q_hub = fit_free_quantiles(_LEVELS, sample, kappa=1.0, steps=300)
    assert float((q_hub - shrunk).abs().max()) < 0.02, q_hub
    assert float(q_hub[1]) > true[1] + 0.25
    q_rel = fit_free_quantiles(_LEVELS, sample, kappa=1.0, pairing="radac_released", steps=300)
    assert float(q_rel.abs().max()) < 0.05 and float(q_rel.max() - q_rel.min()) < 0.05, q_rel


@invariant("huber-quantile-closed-form")
@_FAST
@given(st.floats(0.01, 0.99), st.floats(0.05, 5.0), st.floats(-5, 5), st.floats(0.2, 4.0))
def huber_quantile_closed_form(tau: float, kappa: float, mu: float, sigma: float) -> None:
    """The closed-form minimiser q of the quantile-Huber risk on N(mu, sigma^2) zeroes the risk's
    derivative ``-E[w(U) clip(U, -kappa, kappa)]`` (U = X - q, w = tau above q, 1 - tau below), integrated
    independently by Gauss-Legendre (64 nodes on each smooth piece between the kinks q - kappa, q, q + kappa
    and +-12 sigma); q lies between mu and the true tau-quantile (the shrinkage), tends to the quantile as
    kappa -> 0 and is antisymmetric in tau about 1/2. Negative control: the true quantile does not zero the
    derivative when kappa >= 0.2 sigma and |tau - 1/2| > 0.05."""
    q = huber_quantile_normal(tau, kappa, mu, sigma)
    true = mu + sigma * normal_quantile(tau)
    scale = 1e-9 * (1 + kappa)
    assert abs(_risk_derivative(q, tau, kappa, mu, sigma)) < scale
    lo, hi = min(mu, true), max(mu, true)
    assert lo - 1e-9 <= q <= hi + 1e-9
    assert abs(huber_quantile_normal(tau, 1e-6, mu, sigma) - true) < 1e-3 * sigma
    assert abs((huber_quantile_normal(1 - tau, kappa, mu, sigma) - mu) + (q - mu)) < 1e-9 * (1 + sigma)
    if abs(tau - 0.5) > 0.05 and kappa >= 0.2 * sigma:
        assert abs(_risk_derivative(true, tau, kappa, mu, sigma)) > 1e-4 * kappa


_GL: list[tuple[torch.Tensor, torch.Tensor]] = []


def _risk_derivative(c: float, tau: float, kappa: float, mu: float, sigma: float) -> float:
    """d/dc E[|tau - 1{X < c}| L_kappa(X - c)] for X ~ N(mu, sigma^2), by piecewise Gauss-Legendre."""
    if not _GL:
        import numpy as np

        x, w = np.polynomial.legendre.leggauss(64)
        _GL.append((torch.from_numpy(x), torch.from_numpy(w)))
    nodes, weights = _GL[0]
    lo, hi = mu - 12 * sigma, mu + 12 * sigma
    cuts = sorted({lo, hi, *(min(max(v, lo), hi) for v in (c - kappa, c, c + kappa))})
    total = 0.0
    for a, b in zip(cuts, cuts[1:]):
        if b <= a:
            continue
        x = 0.5 * (b - a) * nodes + 0.5 * (a + b)
        u = x - c
        dens = torch.exp(-0.5 * ((x - mu) / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi))
        w = torch.where(u >= 0, torch.full_like(u, tau), torch.full_like(u, 1 - tau))
        total += float((w * u.clamp(-kappa, kappa) * dens * weights).sum()) * 0.5 * (b - a)
    return -total


@invariant("distortion-samplers-risk-direction")
@_FAST
@given(_SEEDS, st.floats(0.01, 1.0))
def distortion_samplers_risk_direction(seed: int, alpha: float) -> None:
    """Every distortion's taus lie in [0, 1]; ``cvar`` draws exactly ``alpha U`` from the same generator
    (so <= alpha); Wang (eta = -0.7) and power (eta = -2) are risk-averse (mean tau < 0.5 on 4,000 draws:
    their exact means are Phi(-0.7/sqrt 2) = 0.31 and 1/4; a 4,000-draw mean has s.e. < 0.005: no false
    fail in practice); CPW (0.71) stays in [0, 1]. Negative control:
    Wang with eta = +0.7 is risk-seeking (mean > 0.5)."""
    shape = (4000,)
    out = {}
    for name, eta in (("cvar", 0.0), ("neutral", 0.0), ("wang", -0.7), ("cpw", 0.71), ("power", -2.0), ("wang+", 0.7)):
        out[name] = sample_taus(shape, "wang" if name == "wang+" else name, alpha, eta, torch.Generator().manual_seed(seed))  # type: ignore[arg-type]
        assert float(out[name].min()) >= 0 and float(out[name].max()) <= 1
    u = torch.rand(shape, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(out["cvar"], alpha * u) and torch.equal(out["neutral"], u)
    assert float(out["wang"].mean()) < 0.45 and float(out["power"].mean()) < 0.45
    assert float(out["wang+"].mean()) > 0.55


def _tiny(seed: int) -> tuple[DiffusionActor, DoubleIQN]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return DiffusionActor(T=3, width=16, time_dim=8), DoubleIQN(width=16, emb_dim=16, n_cos=4)


@invariant("zero-eta-actor-gradient-ignores-critic")
@_FAST
@given(_SEEDS)
def zero_eta_actor_gradient_ignores_critic(seed: int) -> None:
    """With eta_t = 0 the actor's loss gradient is bitwise the same under two different critics (BC
    only), and the critic gets no gradient; with eta_t > 0 (negative control) it differs (unclipped
    chain: an untrained chain's actions sit on the box, where clipping has zero gradient)."""
    actor, c1 = _tiny(seed)
    _, c2 = _tiny(seed + 1)
    actor.diffusion.clip = None  # an untrained chain leaves the box: clipping would zero the risk gradient
    s = torch.zeros(8, 1)
    a = torch.rand(8, 2, generator=torch.Generator().manual_seed(seed)) * 2 - 1
    cfg = TrainConfig(n_actor_quantiles=4)
    params = list(actor.parameters())

    def grads(critic: DoubleIQN, eta: float) -> list[torch.Tensor]:
        loss, _, _ = actor_loss(actor, critic, s, a, cfg, eta, torch.Generator().manual_seed(seed))
        return list(torch.autograd.grad(loss, params))

    assert all(torch.equal(x, y) for x, y in zip(grads(c1, 0.0), grads(c2, 0.0)))
    assert all(p.grad is None for p in c1.parameters())
    assert not all(torch.equal(x, y) for x, y in zip(grads(c1, 0.5), grads(c2, 0.5)))


@invariant("actions-within-max-action-and-double-critic-min")
@_FAST
@given(_SEEDS, st.floats(0.1, 5.0), st.floats(0.0, 1.0))
def actions_bounded_and_critic_min(seed: int, max_action: float, tau: float) -> None:
    """Actions of the reverse chain lie in [-max_action, max_action] even for a denoiser with weights
    scaled x50; min(Z1, Z2) <= each critic; soft update with tau = 1 copies the source, tau = 0 is a
    no-op, and otherwise gives tau src + (1 - tau) tgt exactly as computed in float32. Negative control:
    the unclipped chain (clip = None) leaves the box for the scaled denoiser."""
    actor, critic = _tiny(seed)
    actor.max_action = max_action
    actor.diffusion.clip = max_action
    with torch.no_grad():
        for p in actor.parameters():
            p.mul_(50)
    g = torch.Generator().manual_seed(seed)
    s = torch.zeros(64, 1)
    noise = actor.chain_noise(64, g)
    with torch.no_grad():
        act = actor(s, noise=noise)
        box = float(torch.tensor(max_action, dtype=torch.float32))  # the float32 bound the clamp uses
        assert float(act.abs().max()) <= box
        actor.diffusion.clip = None
        assert float(actor(s, noise=noise).abs().max()) > box
    taus = torch.rand(64, 5, generator=g)
    z1, z2 = critic(s, act, taus)
    m = critic.min(s, act, taus)
    assert bool((m <= z1).all() and (m <= z2).all()) and bool(((m == z1) | (m == z2)).all())
    _, other = _tiny(seed + 7)
    tgt = copy.deepcopy(other)
    soft_update(tgt, critic, 0.0)
    assert all(torch.equal(x, y) for x, y in zip(tgt.parameters(), other.parameters()))
    want = [tau * ps + (1 - tau) * pt for ps, pt in zip(critic.parameters(), other.parameters())]
    soft_update(tgt, critic, tau)
    assert all(torch.allclose(x, w, rtol=1e-6, atol=1e-7) for x, w in zip(tgt.parameters(), want))
    soft_update(tgt, critic, 1.0)
    assert all(torch.equal(x, y) for x, y in zip(tgt.parameters(), critic.parameters()))
