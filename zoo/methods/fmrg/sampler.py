"""FMRG samplers (spec ``fmrg``): Flow Map Reward Guidance, FMRG-E and FMRG-J, and the baselines that use the
same model: unguided flow-map sampling, DPS-style denoiser guidance and best-of-N.

Huang, Lin, Shah, Nair & Boffi, "How to Guide Your Flow: Few-Step Alignment via Flow Map Reward Guidance",
arXiv 2604.27147 (ICML 2026); public code github.com/jrrhuang/fmrg (``fluxfm_sampler_ip.py``,
``fluxfm_sampler_reward.py``), read for the update rules only. Paper convention t: 0 (noise) -> 1 (data)
(the code's tau = 1 - t). One guided step t -> t' (Delta = t' - t), method note section 4:

* endpoint prediction ``x1_hat = X_{t,1}(x) = x + (1 - t) u(x, t, 1)`` (one NFE);
* trajectory advance ``Step(x)``: ``flow_map1`` = ``x + Delta u(x, t, 1)`` (reuses that call, 1 NFE/step),
  ``flow_map2`` = the exact jump ``X_{t,t'}(x) = x + Delta u(x, t, t')`` (2 NFE/step);
* **FMRG-E** (Euclidean): ``n_opt`` ascent steps on ``r`` in endpoint space from ``x1_hat``, then
  ``x' = Step(x) + w (x1* - x1_hat)`` with the back-projection weight ``w = (1 - t) t'`` (code:
  ``tau_cur (1 - tau_next)``), times ``Delta`` only with ``euc_times_dt`` (the authors' *inverse-problem* sampler
  ``fluxfm_sampler_ip.py`` multiplies by ``dt`` when it normalises; their *reward* sampler
  ``fluxfm_sampler_reward.py``, which this module follows, has no such factor);
* **FMRG-J** (Jacobian): ``n_opt`` ascent steps in state space on ``z -> r(X_{t,1}(z))`` from ``z = x`` (each a
  forward + backward through the flow map; the first reuses the step's call), then ``x' = Step(x) + Delta (z - x)``.
* the authors' normalisation: each gradient rescaled to the norm of the velocity (``normalize_grad``) and an
  Adam inner optimiser (``use_adam``), fresh at every guided step, whose learning rate decays over the *outer*
  sampling steps, ``eta (1 - k / K)`` at guided step k of K (``lr_schedule: outer``, the default: the authors'
  reward sampler, https://github.com/jrrhuang/fmrg/blob/main/fluxfm_sampler_reward.py, ``reward_consistency_xt``
  and ``reward_consistency``: ``lr = stepsize * (1.0 - timestep_idx / total_timesteps)``, with ``timestep_idx``
  the outer step and ``total_timesteps`` the number of guided steps) and is constant over the ``n_opt`` inner
  iterations. ``lr_schedule: inner`` keeps this module's earlier reading, ``eta (1 - i / n_opt)`` over the inner
  iteration i (which never decays at n_opt = 1). The note's smoke test found the untuned plain-gradient version
  unstable.

Only the first ``early_stop`` steps are guided; the trajectory is finished with uncontrolled flow-map jumps
(``unguided_steps`` of them over the rest of ``[t, 1]``, or the rest of the grid).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import torch

from registry.contract import Procedure
from registry.limits import Bound, Rows
from registry.errors import Location, ParamError
from registry.results import ProcedureOutput

from .model import has_two_time_interface
from .params import (BestOfNSamplerParams, DPSSamplerParams, FlowMapSamplerParams, FMRGCli, FMRGSamplerParams,  # noqa: F401
                     RewardSpec, _FlowParams)
from .rewards import reward_fn, reward_grad

__all__ = ["FMRGOutput", "FMRGSampler", "FlowMapSampler", "DPSSampler", "BestOfNSampler", "time_grid", "backprojection_weight", "adam_lr"]


@dataclass
class FMRGOutput(ProcedureOutput):
    """``samples`` (B, d) float64 endpoints; ``rewards`` (B,) their reward; ``nfe`` network evaluations per output
    sample (counted on the model, a batched call counting once; best-of-N multiplies by its candidates)."""

    samples: Any = None
    rewards: Any = None
    nfe: int | None = None


def time_grid(num_steps: int, shift: float = 1.0) -> list[float]:
    """Paper-convention grid ``0 = t_0 < ... < t_N = 1``: FLUX's shifted schedule in ``sigma = 1 - t``,
    ``sigma' = shift sigma / (1 + (shift - 1) sigma)`` on ``sigma = linspace(1, 0, N + 1)`` (``shift = exp(mu)`` of
    FLUX's ``calculate_shift``; 1 = uniform)."""
    out = []
    for k in range(num_steps + 1):
        sig = 1.0 - k / num_steps
        sig = shift * sig / (1.0 + (shift - 1.0) * sig)
        out.append(1.0 - sig)
    out[0], out[-1] = 0.0, 1.0
    return out


def backprojection_weight(t: float, t_next: float) -> float:
    """FMRG-E's weight ``w(t, t') = (1 - t) t'`` (code: ``tau_cur (1 - tau_next)``; method note section 4)."""
    return (1.0 - t) * t_next


def _check_model(model: Any, who: str) -> None:
    if not has_two_time_interface(model):
        raise ParamError(f"{who} needs a flow-map model with the two-time interface (two_time = True and mean_velocity(x, t, s)); "
                         f"got {type(model).__name__}", Location(None, None, None, "parameter sample_mode"))


class _Base(Procedure):
    """Shared inputs/outputs: ``noise`` x_0 ~ N(0, I) (B, d) or ``batch_size`` drawn from ``seed``."""

    kind = "sampler"
    batch_independent: ClassVar[bool] = True
    CliInputs = FMRGCli
    who = "sampler"

    def __init__(self, models, params, device="cpu", dtype=None):
        super().__init__(models, params, device, dtype)
        self.model = self.models["flow_map"]
        _check_model(self.model, type(self).__name__)
        self.reward = reward_fn(self.params.reward, getattr(self.model, "gmm", None))

    def draw_noise(self, batch_size: int, seed: int) -> torch.Tensor:
        return torch.randn(batch_size, self.model.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(int(seed)))

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"noise": self.draw_noise(batch_size, seed=12345)}

    def input_rows(self, inputs):
        return [{**inputs, "noise": inputs["noise"][i : i + 1]} for i in range(inputs["noise"].shape[0])]

    def output_rows(self, outputs):
        return [FMRGOutput(samples=outputs.samples[i : i + 1], rewards=outputs.rewards[i : i + 1], nfe=outputs.nfe) for i in range(outputs.samples.shape[0])]

    def _finish(self, x: torch.Tensor, nfe0: int) -> FMRGOutput:
        x = x.detach()
        with torch.no_grad():
            r = self.reward(x)
        return FMRGOutput(samples=x, rewards=r, nfe=self.model.nfe - nfe0)

    def run_cli(self, inputs, seed: int) -> str:
        n = (inputs or self.CliInputs()).n
        out = self(seed=seed, batch_size=n)
        lp = self.model.log_prob(out.samples) if hasattr(self.model, "log_prob") else None
        msg = f"{type(self).__name__}: {n} samples, NFE {out.nfe}, mean reward {float(out.rewards.mean()):.4f}"
        return msg + (f", mean log p_data {float(lp.mean()):.4f}" if lp is not None else "")


def _advance(model, x: torch.Tensor, t: float, tn: float, mode: str, u1: torch.Tensor | None = None) -> torch.Tensor:
    """Uncontrolled ``Step(x)`` from t to t' (``u1 = u(x, t, 1)`` reused by ``flow_map1`` when given)."""
    if mode == "flow_map1":
        return x + (tn - t) * (model.mean_velocity(x, t, 1.0) if u1 is None else u1)
    return x + (tn - t) * model.mean_velocity(x, t, tn)


class FlowMapSampler(_Base):
    """Unguided few-step flow-map sampling (the reference of the invariant ``zero-strength-is-unguided``):
    ``x_{k+1} = Step(x_k)`` on the grid; ``flow_map2`` ends at ``X_{0,1}(x_0)`` for any grid (semigroup)."""

    Params = FlowMapSamplerParams

    @torch.no_grad()
    def __call__(self, *, seed: int = 0, noise: Annotated[torch.Tensor, Bound("rows")] | None = None, batch_size: Rows = 4) -> FMRGOutput:
        x = self.draw_noise(batch_size, seed) if noise is None else noise.to(torch.float64)
        nfe0 = self.model.nfe
        ts = time_grid(self.params.num_steps, self.params.shift)
        for t, tn in zip(ts, ts[1:]):
            x = _advance(self.model, x, t, tn, self.params.sample_mode)
        return self._finish(x, nfe0)


def adam_lr(eta: float, schedule: str, i: int, n_opt: int, k: int, K: int) -> float:
    """Adam learning rate at inner iteration ``i`` of ``n_opt`` in guided step ``k`` of ``K``: ``outer`` (the
    authors' reward sampler) ``eta (1 - k / K)``, constant over the inner loop; ``inner`` ``eta (1 - i / n_opt)``,
    the same at every guided step."""
    if schedule == "outer":
        return eta * (1.0 - k / K)
    if schedule == "inner":
        return eta * (1.0 - i / n_opt)
    raise ValueError(f"lr_schedule must be 'outer' or 'inner', got {schedule!r}")


def _adam(n_opt: int, eta: float, schedule: str = "outer", k: int = 0, K: int = 1):
    """Per-element Adam (Kingma & Ba, arXiv 1412.6980; betas 0.9/0.999, eps 1e-8; torch.optim.Adam's update) with
    the learning rate of :func:`adam_lr`, as an ascent step ``z + lr * m_hat / (sqrt(v_hat) + eps)``."""
    state: dict[str, Any] = {}

    def step(z: torch.Tensor, g: torch.Tensor, i: int) -> torch.Tensor:
        m = state.get("m", torch.zeros_like(g)) * 0.9 + 0.1 * g
        v = state.get("v", torch.zeros_like(g)) * 0.999 + 0.001 * g * g
        state["m"], state["v"] = m, v
        mh, vh = m / (1 - 0.9 ** (i + 1)), v / (1 - 0.999 ** (i + 1))
        return z + adam_lr(eta, schedule, i, n_opt, k, K) * mh / (vh.sqrt() + 1e-8)

    return step


class FMRGSampler(FlowMapSampler):
    """FMRG-E / FMRG-J (``grad_mode: euc | jac``) on a single trajectory (module docstring for the equations)."""

    Params = FMRGSamplerParams

    def _normalise(self, g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        if not self.params.normalize_grad:
            return g
        gn = g.norm(dim=-1, keepdim=True)
        return g * (u.norm(dim=-1, keepdim=True) / gn.clamp_min(1e-300))

    def _optimiser(self, k: int, K: int):
        p = self.params
        if p.use_adam:
            return _adam(max(p.num_optim_iters, 1), p.step_size, p.lr_schedule, k, K)
        return lambda z, g, i: z + p.step_size * g

    def guided_step(self, x: torch.Tensor, t: float, tn: float, k: int = 0, K: int = 1) -> torch.Tensor:
        """One guided step t -> t' (FMRG-E or FMRG-J), the k-th of K guided steps (0-based; the outer lr schedule)."""
        p, m = self.params, self.model
        dt = tn - t
        opt = self._optimiser(k, K)
        if p.grad_mode == "euc":
            with torch.no_grad():
                u1 = m.mean_velocity(x, t, 1.0)
            x1 = x + (1.0 - t) * u1
            z1 = x1
            for i in range(p.num_optim_iters):
                z1 = opt(z1, self._normalise(reward_grad(self.reward, z1), u1), i)
            corr = backprojection_weight(t, tn) * (z1 - x1)
            if p.euc_times_dt:
                corr = dt * corr
            with torch.no_grad():
                return _advance(m, x, t, tn, p.sample_mode, u1) + corr
        # FMRG-J: ascend z -> r(X_{t,1}(z)) from z = x; the first iteration reuses the step's network call
        z = x
        u1 = None
        for i in range(max(p.num_optim_iters, 1)):
            with torch.enable_grad():
                zz = z.detach().requires_grad_(True)
                u = m.mean_velocity(zz, t, 1.0)
                if i == 0:
                    u1 = u.detach()
                if p.num_optim_iters == 0:
                    break
                (g,) = torch.autograd.grad(self.reward(zz + (1.0 - t) * u).sum(), zz)
            z = opt(z, self._normalise(g, u1), i)
        with torch.no_grad():
            return _advance(m, x, t, tn, p.sample_mode, u1) + dt * (z - x)

    def __call__(self, *, seed: int = 0, noise: Annotated[torch.Tensor, Bound("rows")] | None = None, batch_size: Rows = 4) -> FMRGOutput:
        p = self.params
        x = self.draw_noise(batch_size, seed) if noise is None else noise.to(torch.float64)
        nfe0 = self.model.nfe
        ts = time_grid(p.num_steps, p.shift)
        k_guided = p.num_steps if p.early_stop is None else p.early_stop
        for k, (t, tn) in enumerate(zip(ts[:k_guided], ts[1 : k_guided + 1])):
            x = self.guided_step(x, t, tn, k, k_guided)
        rest = ts[k_guided:]
        if p.unguided_steps is not None and len(rest) > 1:
            t0 = rest[0]
            rest = [t0 + (1.0 - t0) * j / p.unguided_steps for j in range(p.unguided_steps + 1)]
            rest[-1] = 1.0
        with torch.no_grad():
            for t, tn in zip(rest, rest[1:]):
                x = _advance(self.model, x, t, tn, p.sample_mode)
        return self._finish(x, nfe0)


class DPSSampler(FlowMapSampler):
    """DPS-style denoiser guidance (Chung et al., arXiv 2209.14687, in the flow-matching form of FlowDPS/FlowChef;
    the coarsest level of FMRG's hierarchy): Euler on the instantaneous velocity with the reward gradient taken
    through the one-step Tweedie endpoint ``x1_hat = x + (1 - t) b_t(x)``:
    ``x' = x + Delta (b_t(x) + lambda grad_x r(x1_hat(x)))`` (``grad_mode: jac``, through the denoiser) or with
    ``grad r`` evaluated at ``x1_hat`` (``euc``). One NFE (plus its backward) per step."""

    Params = DPSSamplerParams

    def __call__(self, *, seed: int = 0, noise: Annotated[torch.Tensor, Bound("rows")] | None = None, batch_size: Rows = 4) -> FMRGOutput:
        p, m = self.params, self.model
        x = self.draw_noise(batch_size, seed) if noise is None else noise.to(torch.float64)
        nfe0 = m.nfe
        ts = time_grid(p.num_steps, p.shift)
        for t, tn in zip(ts, ts[1:]):
            with torch.enable_grad():
                xx = x.detach().requires_grad_(p.grad_mode == "jac")
                b = m.velocity(xx, t)
                x1 = xx + (1.0 - t) * b
                if p.grad_mode == "jac":
                    (g,) = torch.autograd.grad(self.reward(x1).sum(), xx)
                else:
                    g = reward_grad(self.reward, x1.detach())
            x = (x + (tn - t) * (b.detach() + p.guidance_scale * g)).detach()
        return self._finish(x, nfe0)


class BestOfNSampler(FlowMapSampler):
    """Best-of-N: ``n_candidates`` unguided flow-map samples per output row, keep the one of highest reward
    (``n_candidates`` times the NFE of one trajectory). Candidates of row i are drawn from ``seed`` and the batch
    (not batch-independent)."""

    batch_independent: ClassVar[bool] = False

    Params = BestOfNSamplerParams

    @torch.no_grad()
    def __call__(self, *, seed: int = 0, noise: Annotated[torch.Tensor, Bound("rows")] | None = None, batch_size: Rows = 4) -> FMRGOutput:
        p = self.params
        B = batch_size if noise is None else noise.shape[0]
        n = p.n_candidates
        g = torch.Generator().manual_seed(int(seed))
        cand = torch.randn(B, n, self.model.dim, dtype=torch.float64, generator=g)
        if noise is not None:
            cand[:, 0] = noise.to(torch.float64)
        nfe0 = self.model.nfe
        x = cand.reshape(B * n, -1)
        ts = time_grid(p.num_steps, p.shift)
        for t, tn in zip(ts, ts[1:]):
            x = _advance(self.model, x, t, tn, p.sample_mode)
        r = self.reward(x).reshape(B, n)
        best = r.argmax(dim=1)
        out = x.reshape(B, n, -1)[torch.arange(B), best]
        return FMRGOutput(samples=out, rewards=r[torch.arange(B), best], nfe=(self.model.nfe - nfe0) * n)
