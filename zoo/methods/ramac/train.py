"""RAMAC training (method note sec. 4; arXiv 2510.02695): one loop for the risk-aware actor and its
baselines, which differ only in ``lambda_bc``, ``eta`` and the risk measure (:data:`PRESETS`).

Per gradient step on a batch ``(s, a, r, s', not_done)``:

1. **Critic** (double IQN): ``tau ~ U(0, 1)^N``, ``tau' ~ U(0, 1)^M``; target quantiles
   ``y_j = r + gamma not_done min(Z'_1, Z'_2)(s', a', tau'_j)`` with ``a'`` from the EMA actor and soft
   target critics (for the bandit ``not_done = 0``, so ``y_j = r``: the bootstrap is skipped), clipped to
   ``q_clip``; each critic minimises :func:`~zoo.methods.ramac.risk.quantile_huber_loss` (``pairing``
   standard or the released RADAC one), separate Adam optimisers, gradient-norm clipping.
2. **Actor**: ``L = lambda_bc L_BC - eta_t rho(s, a_pi)`` with ``L_BC`` the DDPM epsilon loss on the data
   actions (RAFMAC: the conditional flow matching loss), ``a_pi`` the reverse chain (RAFMAC: the K-step
   Euler chain) *with gradients*, ``rho = mean_k min(Z_1, Z_2)(s, a_pi, tau_k)`` over
   ``tau_k`` from the risk distortion (CVaR: ``U(0, alpha)``; risk-neutral: ``U(0, 1)``, i.e. E[Z]);
   ``eta_t = 0`` for ``eta_warmup`` steps, then a linear ramp to ``eta`` over ``eta_ramp`` steps. The
   actor's gradient is taken w.r.t. the actor's parameters only (the critic is not updated by it).
3. Soft target critic (``tau_soft``) and EMA actor (decay 0.995 from step 1000, every 5 steps) -- only
   when the data has non-terminal transitions.

Every random draw comes from one seeded generator in a fixed order, so a run is reproducible byte for
byte on one thread (``zoo train ramac --check``).
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from .bandit import BanditData
from .nets import DiffusionActor, DoubleIQN, FlowActor, soft_update

#: either actor: RADAC's diffusion chain or RAFMAC's flow-matching Euler chain (same interface)
Actor = DiffusionActor | FlowActor
from .params import TrainConfig
from .risk import quantile_huber_loss, sample_taus

__all__ = ["TrainConfig", "PRESETS", "TrainResult", "RamacTrainer", "reinitialise", "train_ramac", "actor_loss", "eta_at"]


#: the recipes' presets: RAMAC and the baselines of the note (sec. 6) on the same models and budget
PRESETS: dict[str, dict[str, Any]] = {
    "ramac": {},  # lambda_bc = 1, eta = TrainConfig.eta, risk = cvar
    "bc-only": {"eta": 0.0},
    "risk-neutral": {"risk": "neutral"},
    "cvar-no-bc": {"lambda_bc": 0.0},
}


def eta_at(step: int, cfg: TrainConfig) -> float:
    """``eta_t``: 0 during the warm-up, then a linear ramp to ``eta`` over ``eta_ramp`` steps."""
    if step < cfg.eta_warmup:
        return 0.0
    if cfg.eta_ramp == 0:
        return cfg.eta
    return cfg.eta * min(1.0, (step - cfg.eta_warmup + 1) / cfg.eta_ramp)


@dataclass
class TrainResult:
    actor: Actor
    critic: DoubleIQN
    history: list[dict[str, float | None]] = field(default_factory=list)


def reinitialise(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Reset every submodule's parameters (``reset_parameters``, PyTorch's default init) under ``seed``,
    without touching the global RNG state. The recipe and the training script start from this."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for m in module.modules():
            if hasattr(m, "reset_parameters") and m is not module:
                m.reset_parameters()
    return module


def _critic_step(critic: DoubleIQN, target_critic: DoubleIQN | None, ema_actor: Actor | None, opts: list[torch.optim.Optimizer],
                 s: torch.Tensor, a: torch.Tensor, r: torch.Tensor, s2: torch.Tensor, nd: torch.Tensor, cfg: TrainConfig,
                 g: torch.Generator) -> float:
    B, N = s.shape[0], cfg.n_quantiles
    taus = torch.rand(B, N, generator=g)
    taus_t = torch.rand(B, N, generator=g)
    with torch.no_grad():
        y = r[:, None].expand(B, N)
        if target_critic is not None and ema_actor is not None:
            a2 = ema_actor(s2, generator=g)
            y = y + cfg.discount * nd[:, None] * target_critic.min(s2, a2, taus_t)
        y = y.clamp(-cfg.q_clip, cfg.q_clip)
    total = 0.0
    for net, opt in zip((critic.z1, critic.z2), opts):
        loss = quantile_huber_loss(net(s, a, taus), taus, y, cfg.kappa, cfg.pairing, taus_t)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.grad_norm)
        opt.step()
        total += float(loss.detach())
    return total / 2


def actor_loss(actor: Actor, critic: DoubleIQN, s: torch.Tensor, a: torch.Tensor, cfg: TrainConfig, eta_t: float,
               g: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor, float | None]:
    """``lambda_bc L_BC - eta_t rho(s, a_pi)`` (returns the loss, the BC loss and rho's value; rho is not
    computed (None), and the critic not called, when ``eta_t = 0``)."""
    bc = actor.bc_loss(s, a, generator=g)
    loss = cfg.lambda_bc * bc
    risk_val: float | None = None
    if eta_t > 0:
        if 0 < cfg.risk_batch < s.shape[0]:
            s = s[: cfg.risk_batch]
        a_pi = actor(s, generator=g)
        taus = sample_taus((s.shape[0], cfg.n_actor_quantiles), cfg.risk, cfg.alpha, cfg.risk_eta, generator=g)
        z = critic.min(s, a_pi, taus)
        risk = z.mean()
        if cfg.q_norm:
            risk = risk / z.detach().abs().mean().clamp_min(1e-6)
        loss = loss - eta_t * risk
        risk_val = float(z.detach().mean())
    return loss, bc, risk_val


class RamacTrainer:
    """The training loop as a resumable object: :meth:`run` continues to a given step, :meth:`fork`
    copies the whole state (models, Adam moments, generator) under a config that may differ in the
    post-warm-up fields (``lambda_bc``, ``eta``, ``risk``, ...). Presets share their ``eta = 0`` warm-up
    this way, bit for bit equal to separate runs (``tests/methods/test_ramac.py``). The learning rates
    follow a cosine decay over ``steps`` when ``lr_decay`` (Diffusion-QL's option); the actor's Adam step
    is skipped while its loss has no gradient (``lambda_bc = 0`` during the warm-up)."""

    def __init__(self, actor: Actor, critic: DoubleIQN, data: BanditData, cfg: TrainConfig, generator: torch.Generator):
        self.actor, self.critic, self.data, self.cfg, self.g = actor, critic, data, cfg, generator
        self.bootstrap = bool((data.not_done > 0).any())
        self.target_critic = copy.deepcopy(critic).requires_grad_(False) if self.bootstrap else None
        self.ema_actor = copy.deepcopy(actor).requires_grad_(False) if self.bootstrap else None
        self.opt_actor = torch.optim.Adam(self._actor_params(), lr=cfg.lr_actor)
        self.opt_critic = [torch.optim.Adam(critic.z1.parameters(), lr=cfg.lr_critic), torch.optim.Adam(critic.z2.parameters(), lr=cfg.lr_critic)]
        self.step = 0
        self.history: list[dict[str, float | None]] = []

    def _actor_params(self) -> list[torch.nn.Parameter]:
        return [p for p in self.actor.parameters() if p.requires_grad]

    def _lr(self, base: float) -> float:
        if not self.cfg.lr_decay or self.cfg.steps == 0:
            return base
        return base * 0.5 * (1 + math.cos(math.pi * min(self.step, self.cfg.steps) / self.cfg.steps))

    def fork(self, cfg: TrainConfig | None = None, fresh_actor: Actor | None = None) -> "RamacTrainer":
        """A deep copy of this trainer (generator state included), optionally with a new config (its
        warm-up-relevant fields must match) and a fresh actor with a fresh Adam (what a run whose actor
        never stepped during the warm-up has)."""
        gen = self.g
        self.g = None  # type: ignore[assignment]
        try:
            new = copy.deepcopy(self)
        finally:
            self.g = gen
        new.g = torch.Generator().manual_seed(0)
        new.g.set_state(gen.get_state())
        if cfg is not None:
            keep = {k for k in TrainConfig.model_fields if k not in _POST_WARMUP}
            diff = [k for k in keep if getattr(cfg, k) != getattr(self.cfg, k)]
            if diff:
                raise ValueError(f"fork: fields {sorted(diff)} change the shared warm-up")
            new.cfg = cfg
        if fresh_actor is not None:
            new.actor = fresh_actor
            new.opt_actor = torch.optim.Adam(new._actor_params(), lr=new.cfg.lr_actor)
        return new

    def run(self, until: int | None = None, progress: bool = False) -> "RamacTrainer":
        """Train from the current step to ``until`` (default ``cfg.steps``)."""
        cfg, g, data = self.cfg, self.g, self.data
        until = cfg.steps if until is None else min(until, cfg.steps)
        self.actor.train()
        self.critic.train()
        params = self._actor_params()
        steps = range(self.step, until)
        if progress:
            from zoo.common.training import progress as bar

            steps = bar(steps, desc="ramac")
        n = len(data)
        for step in steps:
            self.step = step
            for opt in self.opt_critic:
                opt.param_groups[0]["lr"] = self._lr(cfg.lr_critic)
            self.opt_actor.param_groups[0]["lr"] = self._lr(cfg.lr_actor)
            idx = torch.randint(0, n, (cfg.batch_size,), generator=g)
            s, a, r, s2, nd = data.states[idx], data.actions[idx], data.rewards[idx], data.next_states[idx], data.not_done[idx]
            c_loss = _critic_step(self.critic, self.target_critic, self.ema_actor, self.opt_critic, s, a, r, s2, nd, cfg, g)
            eta_t = eta_at(step, cfg)
            loss, bc, risk_val = actor_loss(self.actor, self.critic, s, a, cfg, eta_t, g)
            if loss.requires_grad and (cfg.lambda_bc > 0 or eta_t > 0):
                grads = torch.autograd.grad(loss, params, allow_unused=True)
                for p, gr in zip(params, grads):
                    p.grad = gr
                torch.nn.utils.clip_grad_norm_(params, cfg.grad_norm)
                self.opt_actor.step()
            if self.bootstrap:
                assert self.target_critic is not None and self.ema_actor is not None
                soft_update(self.target_critic, self.critic, cfg.tau_soft)
                if step < cfg.ema_start:
                    soft_update(self.ema_actor, self.actor, 1.0)
                elif step % cfg.ema_every == 0:
                    soft_update(self.ema_actor, self.actor, 1 - cfg.ema_decay)
            if step % cfg.log_every == 0 or step == cfg.steps - 1:
                self.history.append({"step": float(step), "critic": c_loss, "bc": float(bc.detach()), "risk": risk_val, "eta": eta_t})
        self.step = until
        self.actor.eval()
        self.critic.eval()
        return self

    def result(self) -> TrainResult:
        return TrainResult(self.actor, self.critic, self.history)


#: config fields that only act after the warm-up (may differ between forks of one warm-up)
_POST_WARMUP = frozenset({"risk_batch", "lambda_bc", "eta", "eta_ramp", "risk", "alpha", "risk_eta", "q_norm", "n_actor_quantiles", "log_every"})


def train_ramac(actor: Actor, critic: DoubleIQN, data: BanditData, cfg: TrainConfig, generator: torch.Generator,
                progress: bool = False) -> TrainResult:
    """Train ``actor`` and ``critic`` in place on ``data`` for ``cfg.steps`` (see the module docstring);
    returns them with a loss history (every ``log_every`` steps: ``step``, ``critic``, ``bc``, ``risk``, ``eta``)."""
    return RamacTrainer(actor, critic, data, cfg, generator).run(progress=progress).result()
