"""RAMAC's networks: the diffusion actor (RADAC) and the double IQN critic, with their factories.

* :class:`DiffusionActor` -- ``pi(a | s)`` as a ``T``-step DDPM on actions conditioned on the state
  (Diffusion-QL, Wang et al., arXiv 2208.06193; :class:`zoo.common.mlp_diffusion.VectorDiffusion`, "vp"
  betas, epsilon prediction, Mish MLP). BC loss ``||eps - eps_theta(sqrt(ab_t) a + sqrt(1-ab_t) eps, t, s)||^2``;
  actions come from the reverse chain, with gradients for the risk term (reparameterised noise). The chain
  noise may be passed in (``noise`` of shape ``(B, T + 1, action_dim)``: ``x_T`` then one ``z`` per step), so
  each row's action depends on that row alone.
* :class:`FlowActor` -- RAFMAC's actor: ``pi(a | s)`` as a rectified flow / conditional flow matching
  velocity field ``v_theta(x, t, s)`` (Liu et al., arXiv 2209.03003; Lipman et al., arXiv 2210.02747,
  eq. 23 with sigma_min = 0): BC loss ``||v_theta((1 - t) x0 + t a, t, s) - (a - x0)||^2``, ``x0 ~ N(0, I)``,
  ``t ~ U(0, 1)``; actions by ``K`` explicit Euler steps ``x_{k+1} = x_k + v_theta(x_k, k/K, s) / K`` from
  ``x_0 ~ N(0, I)``, clipped to ``max_action`` at the end, differentiable end to end for the risk term. The
  only noise is ``x_0`` (``noise`` of shape ``(B, 1, action_dim)``). Network: the Mish MLP of
  :class:`zoo.common.mlp_diffusion.MLPDenoiser` with the time embedded as ``1000 t``.
* :class:`IQNCritic` -- ``Z(s, a, tau)`` (IQN, Dabney et al., arXiv 1806.06923 eq. 4): cosine features
  ``cos(pi i tau)``, ``i = 0..n_cos-1`` -> Linear -> ReLU, multiplied elementwise with a state-action
  embedding (state MLP, action MLP, fused MLP of width ``emb_dim``), then an MLP head -> one value per tau.
* :class:`DoubleIQN` -- two independent critics; the pessimistic ``min(Z_1, Z_2)`` (TD3/Diffusion-QL style).
"""
from __future__ import annotations

import math
from typing import Annotated, Any

import torch
from pydantic import Field
from torch import nn

from registry.contract import factory
from zoo.common.mlp_diffusion import MLPDenoiser, VectorDiffusion

from .params import BuildActorConfig, BuildCriticConfig, BuildFlowActorConfig, Dim, Width

__all__ = ["DiffusionActor", "FlowActor", "build_flow_actor", "IQNCritic", "DoubleIQN", "build_actor", "build_critic", "soft_update"]


class DiffusionActor(nn.Module):
    """Diffusion policy over ``action_dim`` actions in ``[-max_action, max_action]`` given ``state_dim`` states."""

    def __init__(self, state_dim: int = 1, action_dim: int = 2, T: int = 20, schedule: str = "vp", width: int = 128, layers: int = 3,
                 time_dim: int = 16, max_action: float = 1.0):
        super().__init__()
        self.state_dim, self.action_dim, self.max_action = state_dim, action_dim, max_action
        self.diffusion = VectorDiffusion(action_dim, cond_dim=state_dim, T=T, schedule=schedule, width=width, layers=layers,  # type: ignore[arg-type]
                                         time_dim=time_dim, clip=max_action)

    @property
    def T(self) -> int:
        return self.diffusion.T

    @property
    def noise_len(self) -> int:
        """Noise slots per action in :meth:`chain_noise` / ``noise``."""
        return self.T + 1

    def bc_loss(self, states: torch.Tensor, actions: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """The behaviour-cloning (epsilon) loss on a batch of dataset (state, action) pairs."""
        return self.diffusion.loss(actions, cond=states, generator=generator)

    def chain_noise(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``(n, T + 1, action_dim)`` standard normal draws: ``x_T`` then the noise of steps T-1 .. 1 (the last slot is unused)."""
        return torch.randn(n, self.T + 1, self.action_dim, generator=generator)

    def forward(self, states: torch.Tensor, noise: torch.Tensor | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
        """Actions ``(B, action_dim)`` from the reverse chain. Differentiable (keeps the graph when grad is enabled)."""
        if noise is None:
            noise = self.chain_noise(states.shape[0], generator)
        x = noise[:, 0]
        for k, t in enumerate(range(self.T - 1, -1, -1)):
            x = self.diffusion.step(x, t, states, noise[:, k + 1] if t > 0 else None)
        return x


#: the flow time t in [0, 1] is embedded as ``TIME_SCALE t`` (the sinusoid's frequencies suit integer steps)
TIME_SCALE = 1000.0


class FlowActor(nn.Module):
    """RAFMAC's flow-matching policy over ``action_dim`` actions in ``[-max_action, max_action]``."""

    def __init__(self, state_dim: int = 1, action_dim: int = 2, steps: int = 10, width: int = 128, layers: int = 3,
                 time_dim: int = 16, max_action: float = 1.0):
        super().__init__()
        self.state_dim, self.action_dim, self.max_action, self.steps = state_dim, action_dim, max_action, steps
        self.clip: float | None = max_action
        self.velocity = MLPDenoiser(action_dim, state_dim, width, layers, time_dim)

    @property
    def T(self) -> int:
        """Number of Euler steps (the chain length; the diffusion actor's ``T``)."""
        return self.steps

    @property
    def noise_len(self) -> int:
        return 1

    def v(self, x: torch.Tensor, t: float | torch.Tensor, states: torch.Tensor) -> torch.Tensor:
        """``v_theta(x, t, s)`` for ``t`` scalar or ``(B,)`` in [0, 1]."""
        t = torch.as_tensor(t, dtype=x.dtype).reshape(-1).expand(x.shape[0])
        return self.velocity(x, TIME_SCALE * t, states)

    def bc_loss(self, states: torch.Tensor, actions: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Conditional flow matching loss ``E ||v_theta(x_t, t, s) - (a - x0)||^2``, ``x_t = (1 - t) x0 + t a``."""
        t = torch.rand(actions.shape[0], generator=generator, dtype=actions.dtype)
        x0 = torch.randn(actions.shape, generator=generator, dtype=actions.dtype)
        xt = (1 - t[:, None]) * x0 + t[:, None] * actions
        return ((self.v(xt, t, states) - (actions - x0)) ** 2).mean()

    def chain_noise(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``(n, 1, action_dim)`` standard normal starting points ``x_0``."""
        return torch.randn(n, 1, self.action_dim, generator=generator)

    def integrate(self, x0: torch.Tensor, states: torch.Tensor, velocity: Any = None) -> torch.Tensor:
        """``K`` Euler steps of ``dx/dt = velocity(x, t, s)`` from ``t = 0`` to 1 (default: ``v_theta``), unclipped."""
        vel = self.v if velocity is None else velocity
        x, h = x0, 1.0 / self.steps
        for k in range(self.steps):
            x = x + h * vel(x, k * h, states)
        return x

    def forward(self, states: torch.Tensor, noise: torch.Tensor | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
        """Actions ``(B, action_dim)`` from the Euler chain. Differentiable (keeps the graph when grad is enabled)."""
        if noise is None:
            noise = self.chain_noise(states.shape[0], generator)
        x = self.integrate(noise[:, 0], states)
        return x if self.clip is None else x.clamp(-self.clip, self.clip)


def _mlp(d_in: int, width: int, d_out: int, depth: int = 2) -> nn.Sequential:
    layers: list[nn.Module] = []
    for _ in range(depth - 1):
        layers += [nn.Linear(d_in, width), nn.ReLU()]
        d_in = width
    layers.append(nn.Linear(d_in, d_out))
    return nn.Sequential(*layers)


class IQNCritic(nn.Module):
    """One implicit quantile network ``Z(s, a, tau)`` -> ``(B, N)`` for ``taus`` ``(B, N)``."""

    def __init__(self, state_dim: int = 1, action_dim: int = 2, width: int = 64, emb_dim: int = 64, n_cos: int = 16):
        super().__init__()
        self.n_cos = n_cos
        self.state_net = nn.Sequential(nn.Linear(state_dim, width), nn.ReLU())
        self.action_net = nn.Sequential(nn.Linear(action_dim, width), nn.ReLU())
        self.fuse = nn.Sequential(nn.Linear(2 * width, emb_dim), nn.ReLU())
        self.tau_net = nn.Sequential(nn.Linear(n_cos, emb_dim), nn.ReLU())
        self.head = _mlp(emb_dim, width, 1, depth=2)
        self.register_buffer("freqs", math.pi * torch.arange(n_cos, dtype=torch.float32), persistent=False)

    def forward(self, states: torch.Tensor, actions: torch.Tensor, taus: torch.Tensor) -> torch.Tensor:
        sa = self.fuse(torch.cat([self.state_net(states), self.action_net(actions)], dim=1))  # (B, E)
        phi = self.tau_net(torch.cos(taus[..., None] * self.freqs))  # (B, N, E)
        return self.head(sa[:, None, :] * phi).squeeze(-1)


class DoubleIQN(nn.Module):
    """Two IQN critics ``z1``, ``z2``; :meth:`min` is the pessimistic ``min(Z_1, Z_2)`` at the same taus."""

    def __init__(self, state_dim: int = 1, action_dim: int = 2, width: int = 64, emb_dim: int = 64, n_cos: int = 16):
        super().__init__()
        self.z1 = IQNCritic(state_dim, action_dim, width, emb_dim, n_cos)
        self.z2 = IQNCritic(state_dim, action_dim, width, emb_dim, n_cos)

    def forward(self, states: torch.Tensor, actions: torch.Tensor, taus: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.z1(states, actions, taus), self.z2(states, actions, taus)

    def min(self, states: torch.Tensor, actions: torch.Tensor, taus: torch.Tensor) -> torch.Tensor:
        a, b = self(states, actions, taus)
        return torch.minimum(a, b)


@torch.no_grad()
def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """Polyak averaging ``target <- tau source + (1 - tau) target`` (tau = 1 copies, tau = 0 is a no-op)."""
    for pt, ps in zip(target.parameters(), source.parameters()):
        pt.mul_(1 - tau).add_(ps, alpha=tau)


@factory(params=BuildActorConfig)
def build_actor(state_dim: Dim = 1, action_dim: Dim = 2, T: Annotated[int, Field(ge=1, le=1000)] = 20, schedule: str = "vp",
                width: Width = 128, layers: Annotated[int, Field(ge=1, le=16)] = 3, time_dim: Annotated[int, Field(ge=2, le=512)] = 16,
                max_action: Annotated[float, Field(gt=0, le=1e6)] = 1.0) -> DiffusionActor:
    """Factory of the ``actor`` roles (the paper: MLP 3 x 256, T = 5, "vp"; the toy: width 128, T = 20, see the card)."""
    if schedule not in ("vp", "linear", "cosine"):
        raise ValueError(f"schedule must be vp, linear or cosine, got {schedule!r}")
    return DiffusionActor(state_dim, action_dim, T, schedule, width, layers, time_dim, max_action)


@factory(params=BuildFlowActorConfig)
def build_flow_actor(state_dim: Dim = 1, action_dim: Dim = 2, steps: Annotated[int, Field(ge=1, le=1000)] = 10, width: Width = 128,
                     layers: Annotated[int, Field(ge=1, le=16)] = 3, time_dim: Annotated[int, Field(ge=2, le=512)] = 16,
                     max_action: Annotated[float, Field(gt=0, le=1e6)] = 1.0) -> FlowActor:
    """Factory of the ``actor-rafmac`` role (RAFMAC: 10 flow steps in the released code, see the card)."""
    return FlowActor(state_dim, action_dim, steps, width, layers, time_dim, max_action)


@factory(params=BuildCriticConfig)
def build_critic(state_dim: Dim = 1, action_dim: Dim = 2, width: Width = 64, emb_dim: Width = 64,
                 n_cos: Annotated[int, Field(ge=1, le=1024)] = 16) -> DoubleIQN:
    """Factory of the ``critic`` role (double IQN; the paper: width 256, emb_dim 32-128 per task)."""
    return DoubleIQN(state_dim, action_dim, width, emb_dim, n_cos)
