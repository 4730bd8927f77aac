"""Analytic Gaussian-mixture testbed: exact denoiser, score, predictions and probability-flow ODE.

Data law ``p = sum_k pi_k N(mu_k, Sigma_k)`` in ``R^d``. Everything a continuous diffusion sampler
needs is closed form (see ``/work/shared/methods/gaussian-mixture-testbed.md`` section 1a and
Karras et al., "Elucidating the Design Space of Diffusion-Based Generative Models", arXiv 2206.00364,
eq. 1-4 for the EDM coordinates):

* EDM coordinates ``x = y + sigma n`` (``y ~ p``, ``n ~ N(0, I)``), ``C_k(sigma) = Sigma_k + sigma^2 I``;
  responsibilities ``w_k(x, sigma) ~ pi_k N(x; mu_k, C_k)``;
  denoiser ``D(x; sigma) = E[y | x] = sum_k w_k [mu_k + Sigma_k C_k^{-1} (x - mu_k)]``;
  score ``grad log p_sigma(x) = (D - x) / sigma^2``.
* VP coordinates ``x_vp = alpha x0 + s eps`` with ``alpha^2 + s^2 = 1``; ``sigma = s / alpha`` and
  ``x_vp = alpha x``. Predictions: ``eps = (x_vp - alpha D) / s``, ``x0 = D``, ``v = alpha eps - s x0``
  (Salimans & Ho, arXiv 2202.00512, eq. 9).
* Probability-flow ODE (Karras et al. eq. 4 with ``s(t) = 1``, ``sigma(t) = t``):
  ``dx / dsigma = (x - D(x; sigma)) / sigma``, integrated here in ``u = log sigma``:
  ``dx/du = x - D(x; e^u)``. For a single Gaussian it is closed form,
  ``x(sigma) = mu + U diag(sqrt((lambda + sigma^2) / (lambda + sigma0^2))) U^T (x(sigma0) - mu)``.
  Otherwise an adaptive Dormand-Prince 5(4) integrator in float64 (our own, no scipy) gives a
  reference accurate to ~1e-9.

Covariances are stored by eigendecomposition ``Sigma_k = U_k diag(lambda_k) U_k^T`` so every
``C_k(sigma)^{-1}`` is a rescaling in the eigenbasis. Inputs may have any trailing shape
(``(B, d)`` or ``(B, C, H, W)`` with ``C*H*W = d``); outputs keep the input shape.

The module is also usable as the *model* of a diffusers scheduler loop or pipeline through
:class:`AnalyticDiffusionModel` (a ``ModelMixin`` + ``ConfigMixin`` whose ``forward(sample,
timestep)`` returns ``.sample`` like ``UNet2DModel``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, Sequence

import torch
from pydantic import Field
from torch import nn

from registry.contract import FactoryParams, factory
from zoo.common.params import TOY_MIXTURES, AnalyticModelConfig  # noqa: F401 - the torch-free models (registry.declare)

Prediction = Literal["epsilon", "sample", "v_prediction"]


def _as_sigma(sigma: Any, batch: int, ref: torch.Tensor) -> torch.Tensor:
    """Broadcast a scalar / (B,) sigma to a float64 (B,) tensor on ``ref``'s device."""
    s = torch.as_tensor(sigma, dtype=torch.float64, device=ref.device)
    if s.ndim == 0:
        s = s.expand(batch)
    return s.reshape(batch)


class GaussianMixture(nn.Module):
    """A mixture of Gaussians ``sum_k pi_k N(mu_k, Sigma_k)`` with exact diffusion quantities.

    Args:
        weights: ``(K,)`` mixture weights (normalised here).
        means: ``(K, d)``.
        covs: ``(K, d, d)`` full covariances, or
        variances: ``(K,)`` isotropic or ``(K, d)`` diagonal variances (exactly one of the two).
    All buffers are float64; computations run in float64 and cast back to the input dtype.
    """

    def __init__(self, weights: Sequence[float] | torch.Tensor, means: Any, covs: Any = None, variances: Any = None):
        super().__init__()
        w = torch.as_tensor(weights, dtype=torch.float64)
        mu = torch.as_tensor(means, dtype=torch.float64)
        if mu.ndim != 2 or w.shape != (mu.shape[0],):
            raise ValueError(f"means must be (K, d) and weights (K,), got {tuple(mu.shape)} and {tuple(w.shape)}")
        if (w <= 0).any():
            raise ValueError("mixture weights must be positive")
        K, d = mu.shape
        if (covs is None) == (variances is None):
            raise ValueError("give exactly one of covs (K,d,d) or variances (K,) / (K,d)")
        if covs is not None:
            c = torch.as_tensor(covs, dtype=torch.float64)
            if c.shape != (K, d, d):
                raise ValueError(f"covs must be (K, d, d) = {(K, d, d)}, got {tuple(c.shape)}")
            c = 0.5 * (c + c.transpose(-1, -2))
            evals, evecs = torch.linalg.eigh(c)
        else:
            v = torch.as_tensor(variances, dtype=torch.float64)
            if v.ndim == 1:
                v = v[:, None].expand(K, d)
            if v.shape != (K, d):
                raise ValueError(f"variances must be (K,) or (K, d), got {tuple(v.shape)}")
            evals = v.clone()
            evecs = torch.eye(d, dtype=torch.float64).expand(K, d, d).clone()
        if (evals < 0).any():
            raise ValueError("covariances must be positive semi-definite")
        self.register_buffer("log_weights", torch.log(w / w.sum()))
        self.register_buffer("means", mu.clone())
        self.register_buffer("evals", evals.clamp_min(0.0))
        self.register_buffer("evecs", evecs)

    # ------------------------------------------------------------------ basics
    @property
    def num_components(self) -> int:
        return self.means.shape[0]

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    @property
    def is_single_gaussian(self) -> bool:
        return self.num_components == 1

    def covariances(self) -> torch.Tensor:
        return self.evecs @ torch.diag_embed(self.evals) @ self.evecs.transpose(-1, -2)

    def _flat(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] == self.dim and x.ndim == 2:
            return x.to(torch.float64)
        flat = x.reshape(x.shape[0], -1)
        if flat.shape[1] != self.dim:
            raise ValueError(f"input has {flat.shape[1]} features per row, mixture has d={self.dim}")
        return flat.to(torch.float64)

    def _eigen_coords(self, x: torch.Tensor) -> torch.Tensor:
        """z[b, k] = U_k^T (x_b - mu_k), shape (B, K, d)."""
        diff = x[:, None, :] - self.means[None]
        return torch.einsum("kde,bkd->bke", self.evecs, diff)

    def _posterior(self, x: torch.Tensor, sigma: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Responsibilities (B,K), eigen-coords z (B,K,d) and C eigenvalues (B,K,d) at noise sigma."""
        z = self._eigen_coords(x)
        c = self.evals[None] + (sigma**2)[:, None, None]
        logn = -0.5 * ((z**2) / c + torch.log(2 * math.pi * c)).sum(-1)
        logits = self.log_weights[None] + logn
        return torch.softmax(logits, dim=-1), z, c

    # ------------------------------------------------------------------ EDM quantities
    def denoise(self, x: torch.Tensor, sigma: Any) -> torch.Tensor:
        """Exact ``D(x; sigma) = E[y | y + sigma n = x]`` (EDM coordinates)."""
        xf = self._flat(x)
        s = _as_sigma(sigma, xf.shape[0], xf)
        w, z, c = self._posterior(xf, s)
        shrunk = z * (self.evals[None] / c)  # Sigma C^{-1} (x - mu) in eigen-coords
        back = torch.einsum("kde,bke->bkd", self.evecs, shrunk) + self.means[None]
        d = (w[..., None] * back).sum(1)
        return d.reshape(x.shape).to(x.dtype)

    def score(self, x: torch.Tensor, sigma: Any) -> torch.Tensor:
        """``grad_x log p_sigma(x) = (D(x; sigma) - x) / sigma^2``, computed directly (valid at sigma = 0)."""
        xf = self._flat(x)
        s = _as_sigma(sigma, xf.shape[0], xf)
        w, z, c = self._posterior(xf, s)
        g = -torch.einsum("kde,bke->bkd", self.evecs, z / c)
        return (w[..., None] * g).sum(1).reshape(x.shape).to(x.dtype)

    def log_prob(self, x: torch.Tensor, sigma: Any = 0.0) -> torch.Tensor:
        """Exact ``log p_sigma(x)`` of the noised law (``sigma = 0``: the data law), shape (B,)."""
        xf = self._flat(x)
        s = _as_sigma(sigma, xf.shape[0], xf)
        z = self._eigen_coords(xf)
        c = self.evals[None] + (s**2)[:, None, None]
        if (c <= 0).any():
            raise ValueError("log_prob at sigma = 0 needs non-degenerate covariances")
        logn = -0.5 * ((z**2) / c + torch.log(2 * math.pi * c)).sum(-1)
        return torch.logsumexp(self.log_weights[None] + logn, dim=-1)

    def sample(self, n: int, generator: torch.Generator | None = None, sigma: float = 0.0) -> torch.Tensor:
        """``n`` exact samples of ``p_sigma`` (float64, shape (n, d))."""
        comp = torch.multinomial(self.log_weights.exp(), n, replacement=True, generator=generator)
        eps = torch.randn(n, self.dim, dtype=torch.float64, generator=generator)
        y = self.means[comp] + torch.einsum("bde,be->bd", self.evecs[comp], eps * self.evals[comp].sqrt())
        if sigma > 0:
            y = y + sigma * torch.randn(n, self.dim, dtype=torch.float64, generator=generator)
        return y

    # ------------------------------------------------------------------ VP predictions
    def predict_vp(self, x_vp: torch.Tensor, alpha_bar: Any, prediction_type: Prediction = "epsilon") -> torch.Tensor:
        """Exact VP-model output at ``x_vp`` with ``alpha_bar`` (scalar or (B,)): eps / x0 / v."""
        xf = self._flat(x_vp)
        ab = _as_sigma(alpha_bar, xf.shape[0], xf)
        a, s = ab.sqrt()[:, None], (1 - ab).sqrt()[:, None]
        sigma = (s / a)[:, 0]
        d = self._flat(self.denoise(xf / a, sigma))
        if prediction_type == "sample":
            out = d
        else:
            eps = (xf - a * d) / s
            if prediction_type == "epsilon":
                out = eps
            elif prediction_type == "v_prediction":
                out = a * eps - s * d
            else:
                raise ValueError(f"unknown prediction_type {prediction_type!r}")
        return out.reshape(x_vp.shape).to(x_vp.dtype)

    # ------------------------------------------------------------------ exact PF-ODE
    def exact_ode(self, x: torch.Tensor, sigma_start: float, sigma_end: float, rtol: float = 1e-10, atol: float = 1e-10) -> torch.Tensor:
        """Exact probability-flow ODE map from ``sigma_start`` to ``sigma_end`` in EDM coordinates.

        Closed form for a single Gaussian; otherwise adaptive Dormand-Prince 5(4) in ``u = log sigma``
        (``dx/du = x - D(x; e^u)``). ``sigma_end = 0`` integrates to 1e-7 and applies D once (the
        remaining map is the identity up to O(1e-14)).
        """
        xf = self._flat(x)
        if sigma_start < 0 or sigma_end < 0:
            raise ValueError("sigmas must be non-negative")
        if self.is_single_gaussian:
            z = self._eigen_coords(xf)[:, 0]
            lam = self.evals[0]
            ratio = torch.sqrt((lam + sigma_end**2) / (lam + sigma_start**2))
            out = self.means[0] + (self.evecs[0] @ (z * ratio).T).T
            return out.reshape(x.shape).to(x.dtype)
        end = max(sigma_end, 1e-7)
        y = _dopri5(lambda u, y: y - self._flat(self.denoise(y, math.exp(u))), math.log(sigma_start), math.log(end), xf, rtol, atol)
        if sigma_end == 0:
            y = self._flat(self.denoise(y, end))
        return y.reshape(x.shape).to(x.dtype)

    def exact_ode_vp(self, x_vp: torch.Tensor, alpha_bar_start: float, alpha_bar_end: float) -> torch.Tensor:
        """The same exact PF-ODE map in VP coordinates (``x_vp = sqrt(alpha_bar) x``)."""
        s0 = math.sqrt((1 - alpha_bar_start) / alpha_bar_start)
        s1 = math.sqrt((1 - alpha_bar_end) / alpha_bar_end)
        x = self.exact_ode(x_vp.to(torch.float64) / math.sqrt(alpha_bar_start), s0, s1)
        return (x * math.sqrt(alpha_bar_end)).to(x_vp.dtype)


# Dormand-Prince 5(4) tableau (Dormand & Prince 1980), FSAL not exploited for brevity.
_A = [
    [],
    [1 / 5],
    [3 / 40, 9 / 40],
    [44 / 45, -56 / 15, 32 / 9],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
    [35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84],
]
_C = [0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0]
_B5 = [35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0]
_B4 = [5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40]


def _dopri5(f, t0: float, t1: float, y0: torch.Tensor, rtol: float, atol: float, max_steps: int = 200_000) -> torch.Tensor:
    """Adaptive Dormand-Prince 5(4) from t0 to t1 (either direction), error control on the whole batch."""
    direction = 1.0 if t1 >= t0 else -1.0
    t, y = t0, y0.clone()
    h = direction * min(0.05, abs(t1 - t0)) if t1 != t0 else 0.0
    steps = 0
    while direction * (t1 - t) > 1e-15:
        if direction * (t + h - t1) > 0:
            h = t1 - t
        ks = []
        for i in range(7):
            yi = y
            for j, a in enumerate(_A[i]):
                if a != 0.0:
                    yi = yi + h * a * ks[j]
            ks.append(f(t + _C[i] * h, yi))
        y5 = y + h * sum(b * k for b, k in zip(_B5, ks) if b != 0.0)
        y4 = y + h * sum(b * k for b, k in zip(_B4, ks) if b != 0.0)
        scale = atol + rtol * torch.maximum(y.abs(), y5.abs())
        err = ((y5 - y4) / scale).pow(2).mean().sqrt().item()
        if err <= 1.0:
            t, y = t + h, y5
        factor = 0.9 * (1.0 / max(err, 1e-10)) ** 0.2
        h = h * min(5.0, max(0.2, factor))
        steps += 1
        if steps > max_steps:
            raise RuntimeError("exact_ode: too many steps (stiff problem?)")
    return y


# ---------------------------------------------------------------------------- VP schedule helpers


@dataclass(frozen=True)
class VPSchedule:
    """A diffusers-style discrete VP schedule with continuous-time interpolation.

    ``alphas_cumprod[t]`` for integer ``t``; fractional ``t`` interpolates ``log sigma`` linearly
    between neighbours (the convention of diffusers' ``_sigma_to_t``), extrapolating linearly outside
    ``[0, T-1]``. ``sigma`` here is the EDM noise level ``sqrt((1 - ab) / ab)``.
    """

    alphas_cumprod: torch.Tensor  # float64 (T,)

    @classmethod
    def from_betas(cls, num_train_timesteps: int = 1000, beta_start: float = 1e-4, beta_end: float = 0.02, beta_schedule: str = "linear") -> "VPSchedule":
        if beta_schedule == "linear":
            betas = torch.linspace(beta_start, beta_end, num_train_timesteps, dtype=torch.float64)
        elif beta_schedule == "scaled_linear":
            betas = torch.linspace(beta_start**0.5, beta_end**0.5, num_train_timesteps, dtype=torch.float64) ** 2
        elif beta_schedule == "squaredcos_cap_v2":
            f = lambda t: math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2  # noqa: E731
            betas = torch.tensor([min(1 - f((i + 1) / num_train_timesteps) / f(i / num_train_timesteps), 0.999) for i in range(num_train_timesteps)], dtype=torch.float64)
        else:
            raise ValueError(f"unsupported beta_schedule {beta_schedule!r}")
        return cls(torch.cumprod(1.0 - betas, 0))

    @property
    def log_sigmas(self) -> torch.Tensor:
        ab = self.alphas_cumprod
        return 0.5 * torch.log((1 - ab) / ab)

    def alpha_bar(self, t: torch.Tensor | float) -> torch.Tensor:
        t = torch.as_tensor(t, dtype=torch.float64)
        ls = self.log_sigmas
        T = ls.shape[0]
        lo = t.floor().clamp(0, T - 2)
        frac = t - lo
        lo_i = lo.long()
        log_sigma = ls[lo_i] * (1 - frac) + ls[lo_i + 1] * frac
        sigma2 = torch.exp(2 * log_sigma)
        return 1.0 / (1.0 + sigma2)


# ---------------------------------------------------------------------------- diffusers model wrapper

def _make_analytic_model_class():
    """Build the diffusers wrapper class on first use, so ``import zoo.common.gmm`` does not import diffusers."""
    from diffusers.configuration_utils import ConfigMixin, register_to_config
    from diffusers.models.modeling_utils import ModelMixin
    from diffusers.utils import BaseOutput

    @dataclass
    class AnalyticModelOutput(BaseOutput):
        sample: torch.Tensor

    class AnalyticDiffusionModel(ModelMixin, ConfigMixin):
        """The exact mixture as a diffusers denoising model (``UNet2DModel``-style call).

        ``forward(sample, timestep)`` returns ``.sample`` = the exact ``prediction_type`` output of a
        VP model with the configured training schedule, at the continuous timestep(s) ``timestep``
        (scalar or (B,)). ``sample`` may have shape ``(B, in_channels, sample_size, sample_size)``
        (pipelines) or ``(B, d)``. ``call_log`` records every call's timesteps (NFE accounting).
        """

        @register_to_config
        def __init__(
            self,
            weights: list[float] = (1.0,),
            means: list[list[float]] = ((0.0, 0.0),),
            variances: list[Any] | None = (1.0,),
            covs: list[Any] | None = None,
            prediction_type: str = "epsilon",
            num_train_timesteps: int = 1000,
            beta_start: float = 1e-4,
            beta_end: float = 0.02,
            beta_schedule: str = "linear",
            in_channels: int = 1,
            sample_size: int | None = None,
        ):
            super().__init__()
            var = None if variances is None else [v if isinstance(v, (int, float)) else list(v) for v in variances]
            self.gmm = GaussianMixture(list(weights), [list(m) for m in means], covs=covs, variances=var)
            sch = VPSchedule.from_betas(num_train_timesteps, beta_start, beta_end, beta_schedule)
            self.register_buffer("alphas_cumprod", sch.alphas_cumprod)
            self.call_log: list[torch.Tensor] = []
            # a dummy parameter so ModelMixin.dtype/device work
            self.register_parameter("_anchor", nn.Parameter(torch.zeros((), dtype=torch.float64), requires_grad=False))

        @property
        def out_channels(self) -> int:
            return self.config.in_channels

        def alpha_bar(self, timestep: torch.Tensor) -> torch.Tensor:
            return VPSchedule(self.alphas_cumprod).alpha_bar(timestep)

        def forward(self, sample: torch.Tensor, timestep: Any, class_labels: Any = None, return_dict: bool = True, **_: Any):
            t = torch.as_tensor(timestep, dtype=torch.float64, device=sample.device)
            if t.ndim == 0:
                t = t.expand(sample.shape[0])
            self.call_log.append(t.detach().clone())
            ab = self.alpha_bar(t)
            out = self.gmm.predict_vp(sample, ab, self.config.prediction_type)
            return AnalyticModelOutput(sample=out) if return_dict else (out,)

    for cls in (AnalyticModelOutput, AnalyticDiffusionModel):
        cls.__module__ = __name__
        cls.__qualname__ = cls.__name__
    return AnalyticModelOutput, AnalyticDiffusionModel


_LAZY: dict[str, Any] = {}


def __getattr__(name: str) -> Any:  # PEP 562: AnalyticDiffusionModel / AnalyticModelOutput on first access
    if name in ("AnalyticDiffusionModel", "AnalyticModelOutput"):
        if not _LAZY:
            _LAZY["AnalyticModelOutput"], _LAZY["AnalyticDiffusionModel"] = _make_analytic_model_class()
        return _LAZY[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------------------- standard toy mixtures: TOY_MIXTURES (zoo.common.params)


def build_mixture(name: str = "gmm3", **overrides: Any) -> GaussianMixture:
    """A named toy mixture (``gaussian`` or ``gmm3``), or an explicit one from ``weights/means/variances|covs``."""
    if name not in TOY_MIXTURES:
        raise ValueError(f"unknown mixture {name!r}; have {sorted(TOY_MIXTURES)}")
    cfg = {**TOY_MIXTURES[name], **overrides}
    return GaussianMixture(cfg["weights"], cfg["means"], covs=cfg.get("covs"), variances=cfg.get("variances") if cfg.get("covs") is None else None)


def sliced_wasserstein2(x: torch.Tensor, y: torch.Tensor, n_projections: int = 128, generator: torch.Generator | None = None) -> float:
    """Sliced Wasserstein-2 distance between two equal-size point clouds (exact 1-D OT per projection)."""
    x, y = x.reshape(x.shape[0], -1).double(), y.reshape(y.shape[0], -1).double()
    if x.shape != y.shape:
        raise ValueError("sliced_wasserstein2 needs equal-size clouds")
    dirs = torch.randn(n_projections, x.shape[1], dtype=torch.float64, generator=generator)
    dirs = dirs / dirs.norm(dim=1, keepdim=True)
    px, _ = torch.sort(x @ dirs.T, dim=0)
    py, _ = torch.sort(y @ dirs.T, dim=0)
    return float(((px - py) ** 2).mean().sqrt())


@factory(params=AnalyticModelConfig)
def analytic_model(mixture: str = "gmm3", prediction_type: str = "epsilon", num_train_timesteps: int = 1000, beta_start: float = 1e-4, beta_end: float = 0.02, beta_schedule: str = "linear", **explicit: Any) -> "AnalyticDiffusionModel":
    """Factory for specs (``source: zoo``): a named toy mixture as a float64 diffusers model.

    ``explicit`` may give ``weights``, ``means`` and ``variances`` / ``covs`` instead of a named mixture.
    """
    if not explicit and mixture not in TOY_MIXTURES:
        raise ValueError(f"unknown mixture {mixture!r}; have {sorted(TOY_MIXTURES)} (or pass weights/means/variances)")
    cfg = dict(TOY_MIXTURES[mixture]) if not explicit else {}
    cfg.update(explicit)
    model = __getattr__("AnalyticDiffusionModel")(
        weights=list(cfg["weights"]), means=[list(m) for m in cfg["means"]], variances=cfg.get("variances"), covs=cfg.get("covs"),
        prediction_type=prediction_type, num_train_timesteps=num_train_timesteps, beta_start=beta_start, beta_end=beta_end, beta_schedule=beta_schedule,
    )
    return model.eval()
