"""PFGM++ in one place: the kernel, the exact field of a Gaussian mixture, EDM's Heun sampler and the toy's measures.

Used by two specs: ``pfgmpp`` (the teacher sampler, :class:`zoo.methods.pfgmpp.PFGMPPSampler`) and ``ipfm`` (whose
teacher role is this module's :func:`analytic_pfgmpp` and whose networks are :class:`EDMField`).

**Kernel** (Xu et al., arXiv 2302.04265, sec. 3-4; notation of ``/work/shared/methods/gaussian-mixture-testbed.md``
section 1c): with ``r = sigma sqrt(D)`` the perturbation kernel ``p_r(x | y) ~ (||x - y||^2 + r^2)^{-(N + D)/2}`` in
``R^N`` is a multivariate Student-t with ``D`` degrees of freedom and scale ``sigma``; its radius ``R = ||x - y||``
satisfies ``R^2 / (R^2 + r^2) ~ Beta(N/2, D/2)`` (the paper's sampling rule: ``R = r sqrt(b / (1 - b))``, uniform
direction). Equivalently ``x - y = sigma z / sqrt(w)``, ``z ~ N(0, I)``, ``w ~ Gamma(D/2, rate D/2)``, so the exact
posterior mean ("denoiser") of a mixture is a 1-D integral over ``w`` of Gaussian denoisers at noise
``sigma / sqrt(w)``, computed here by a trapezoid rule in ``log w`` (spectrally accurate for this smooth, unimodal
integrand). ``D = inf`` is the Gaussian (diffusion) case.

**Teacher** :class:`AnalyticPFGMPP`: that exact posterior mean of a named toy mixture at a fixed ``D`` (eq. 9 /
sec. 4), so any distillation failure on the toy is the distiller's, never the teacher's.

**Sampler** (sec. 4 and Alg. 2; github.com/Newbeeer/pfgmpp ``generate.py``): the backward ODE
``dx/dr = (x - E_{p_r}[y | x]) / r`` is EDM's probability-flow ODE ``dx/dsigma = (x - D(x; sigma)) / sigma`` with the
PFGM++ posterior mean as ``D``, solved by EDM's Heun sampler on the Karras grid (Karras et al., arXiv 2206.00364,
Alg. 1; N steps = 2N - 1 model calls) from a kernel sample around 0 at ``r_max = sigma_max sqrt(D)``.

**Learned fields** :class:`EDMField` (the IPFM generator ``G_theta`` and fake field ``f_psi``) use EDM
preconditioning (Karras et al., Table 1): ``f(x, sigma) = c_skip x + c_out F(c_in x, c_noise)`` with
``c_skip = sigma_d^2 / (sigma^2 + sigma_d^2)``, ``c_out = sigma sigma_d / sqrt(sigma^2 + sigma_d^2)``,
``c_in = 1 / sqrt(sigma^2 + sigma_d^2)``, ``c_noise = log(sigma) / 4``; ``F`` is :class:`zoo.common.mlp_diffusion.MLPDenoiser`.

**Measures**: sliced Wasserstein-2 to exact data samples and the exact data log-likelihood of samples (testbed
section 1d), for the teacher's Heun sampler at a given NFE and for exact data (the floor).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import torch
from pydantic import Field
from torch import nn

from registry.contract import FactoryParams, factory, summarize
from registry.results import ProcedureOutput
from zoo.common.params import DValue, TeacherConfig  # noqa: F401 - the torch-free models (registry.declare)

from .gmm import TOY_MIXTURES, GaussianMixture, _as_sigma, build_mixture, sliced_wasserstein2
from .mlp_diffusion import MLPDenoiser
from .out_files import SamplesCli

__all__ = [
    "gamma_sample", "pfgmpp_noise", "pfgmpp_radius_cdf", "pfgmpp_log_kernel", "pfgmpp_denoise",
    "DValue", "RING8", "as_D", "make_mixture", "AnalyticPFGMPP", "TeacherConfig", "analytic_pfgmpp", "edm_coefficients", "EDMField",
    "karras_sigmas", "SampleOutput", "heun_sample", "ToySamplesCli", "NFE_STEPS", "quality", "teacher_quality", "data_quality",
]


# ----------------------------------------------------------------------------- kernel and exact field
def gamma_sample(shape_param: float, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``n`` draws of ``Gamma(shape_param, rate 1)`` (float64) from a torch generator.

    Marsaglia & Tsang (ACM TOMS 26(3), 2000) squeeze-rejection for shape >= 1; shape < 1 via
    ``Gamma(a) = Gamma(a + 1) U^{1/a}``.
    """
    a = float(shape_param)
    if a <= 0:
        raise ValueError("gamma shape must be positive")
    boost = a < 1
    a1 = a + 1 if boost else a
    d = a1 - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    out = torch.empty(n, dtype=torch.float64)
    todo = torch.arange(n)
    while todo.numel():
        m = todo.numel()
        z = torch.randn(m, dtype=torch.float64, generator=generator)
        u = torch.rand(m, dtype=torch.float64, generator=generator)
        v = (1 + c * z) ** 3
        ok = (v > 0) & (torch.log(u) < 0.5 * z**2 + d - d * v + d * torch.log(v.clamp_min(1e-300)))
        out[todo[ok]] = d * v[ok]
        todo = todo[~ok]
    if boost:
        out = out * torch.rand(n, dtype=torch.float64, generator=generator) ** (1.0 / a)
    return out


def pfgmpp_noise(n: int, dim: int, sigma: float, D: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """``n`` draws of the PFGM++ perturbation ``x - y`` in ``R^dim`` (float64, ``(n, dim)``).

    Radius ``R = r sqrt(b / (1 - b))``, ``r = sigma sqrt(D)``, ``b ~ Beta(dim/2, D/2)``, uniform direction
    (Xu et al. 2023, Alg. 1/3). Sampled as ``b/(1-b) = G1/G2`` with ``G1 = ||z||^2/2 ~ Gamma(dim/2)``
    from the same Gaussian ``z`` whose direction is used (norm and direction of ``z`` are independent)
    and ``G2 ~ Gamma(D/2)``. ``D = inf``: ``sigma z``.
    """
    z = torch.randn(n, dim, dtype=torch.float64, generator=generator)
    if math.isinf(D):
        return sigma * z
    g2 = gamma_sample(D / 2.0, n, generator)
    # R = r sqrt(G1/G2) = sigma sqrt(D) ||z|| / sqrt(2 G2); direction z / ||z||
    return z * (sigma * math.sqrt(D) / torch.sqrt(2.0 * g2))[:, None]


def pfgmpp_radius_cdf(R: Any, dim: int, sigma: float, D: float) -> Any:
    """CDF of the PFGM++ kernel radius: ``P(||x - y|| <= R) = I_{R^2/(R^2 + r^2)}(dim/2, D/2)`` (regularised
    incomplete beta), from the radial density ``p(R) ~ R^{dim-1} (R^2 + r^2)^{-(dim+D)/2}``."""
    import numpy as np
    from scipy.special import betainc

    R = np.asarray(R, dtype=np.float64)
    r2 = sigma**2 * D
    return betainc(dim / 2.0, D / 2.0, R**2 / (R**2 + r2))


def pfgmpp_log_kernel(x: torch.Tensor, y: torch.Tensor, sigma: float, D: float) -> torch.Tensor:
    """Normalised ``log p_r(x | y)`` in ``R^N`` (multivariate Student-t, ``nu = D``, scale ``sigma``)."""
    N = x.shape[-1]
    q = ((x.double() - y.double()) ** 2).sum(-1) / sigma**2
    const = math.lgamma((D + N) / 2) - math.lgamma(D / 2) - 0.5 * N * math.log(D * math.pi) - N * math.log(sigma)
    return const - 0.5 * (D + N) * torch.log1p(q / D)


def pfgmpp_denoise(gmm: GaussianMixture, x: torch.Tensor, sigma: Any, D: float, nodes: int = 801, span_sd: float = 12.0) -> torch.Tensor:
    """Exact PFGM++ posterior mean ``E[y | x]`` of the mixture under the kernel at ``sigma`` with ``D``.

    ``E[y|x] = sum_k int pi_k Gamma(w) N(x; mu_k, Sigma_k + sigma^2/w I) [mu_k + Sigma_k (Sigma_k + sigma^2/w I)^{-1}
    (x - mu_k)] dw / (same without the bracket)`` (testbed section 1c), by a trapezoid rule in ``l = log w``
    with ``nodes`` points per (row, component), spanning the prior ``w = 1`` and the point-mass posterior
    mode ``w* = (D + N) / (D + ||x - mu_k||^2 / sigma^2)``, ``span_sd`` log-w standard deviations beyond each.
    ``sigma`` is a scalar or a ``(B,)`` tensor (one noise level per row); the result is differentiable in ``x``.
    """
    if math.isinf(D):
        return gmm.denoise(x, sigma)
    xf = gmm._flat(x)
    B, N = xf.shape
    K = gmm.num_components
    sd = math.sqrt(2.0 / D)  # prior sd of log w, >= the posterior's
    s2 = _as_sigma(sigma, B, xf)[:, None] ** 2  # (B, 1)
    q = ((xf[:, None, :] - gmm.means[None]) ** 2).sum(-1)  # (B, K)
    l_star = math.log(D + N) - torch.log(D + q / s2)
    lo = torch.minimum(l_star, torch.zeros_like(l_star)) - span_sd * sd
    hi = torch.maximum(l_star, torch.zeros_like(l_star)) + span_sd * sd
    frac = torch.linspace(0.0, 1.0, nodes, dtype=torch.float64)
    ell = lo[..., None] + (hi - lo)[..., None] * frac  # (B, K, G)
    h = (hi - lo) / (nodes - 1)
    trap = torch.full((nodes,), 0.0, dtype=torch.float64)
    trap[0] = trap[-1] = math.log(0.5)
    w = ell.exp()
    log_prior = 0.5 * D * math.log(0.5 * D) - math.lgamma(0.5 * D) + 0.5 * D * ell - 0.5 * D * w  # log(gamma(w) * w)
    z = gmm._eigen_coords(xf)  # (B, K, N)
    c = gmm.evals[None, :, None, :] + (s2[..., None] / w)[..., None]  # (B, K, G, N)
    logn = -0.5 * ((z[:, :, None, :] ** 2) / c + torch.log(2 * math.pi * c)).sum(-1)  # (B, K, G)
    logint = log_prior + logn + trap + torch.log(h)[..., None]
    log_z = torch.logsumexp(logint, dim=-1)  # (B, K)
    inner = torch.softmax(logint, dim=-1)  # (B, K, G)
    shrunk = (inner[..., None] * (gmm.evals[None, :, None, :] / c)).sum(2) * z  # (B, K, N) eigen-coords
    back = torch.einsum("kde,bke->bkd", gmm.evecs, shrunk) + gmm.means[None]
    resp = torch.softmax(gmm.log_weights[None] + log_z, dim=-1)
    out = (resp[..., None] * back).sum(1)
    return out.reshape(x.shape).to(x.dtype)


# ----------------------------------------------------------------------------- the exact toy teacher and learned fields

#: 8 modes on a circle of radius 2, variance 0.02 (the note's suggested 2-D law, section 6)
RING8 = {"weights": [1.0] * 8, "means": [[2 * math.cos(2 * math.pi * k / 8), 2 * math.sin(2 * math.pi * k / 8)] for k in range(8)],
         "variances": [0.02] * 8}


def as_D(D: Any) -> float:
    """``"inf"`` / ``None`` / ``math.inf`` -> ``inf``; a positive integer -> float."""
    if D is None or D == "inf" or (isinstance(D, float) and math.isinf(D)):
        return math.inf
    D = float(D)
    if D < 1:
        raise ValueError(f"D must be an integer >= 1 or 'inf', got {D}")
    return D


def make_mixture(name: str) -> GaussianMixture:
    if name == "ring8":
        return GaussianMixture(RING8["weights"], RING8["means"], variances=RING8["variances"])
    return build_mixture(name)


class AnalyticPFGMPP(nn.Module):
    """The exact PFGM++ teacher of a Gaussian mixture at a fixed ``D``: ``denoise(x, sigma)`` = E[y | x] under the kernel.

    Also exposes the data law (``gmm``: ``sample``, ``log_prob``) for metrics, ``prior(n, sigma_max)`` (the heavy-tailed
    PFGM++ prior ``x_T = kernel sample around 0 at r_max = sigma_max sqrt(D)``) and ``sigma_data``. ``calls`` counts
    denoiser evaluations (NFE accounting).
    """

    def __init__(self, mixture: str = "gmm3", D: Any = 128, nodes: int = 201):
        super().__init__()
        self.gmm = make_mixture(mixture)
        self.mixture, self.D, self.nodes = mixture, as_D(D), nodes
        self.calls = 0

    @property
    def dim(self) -> int:
        return self.gmm.dim

    @property
    def sigma_data(self) -> float:
        """Per-coordinate data standard deviation (EDM's ``sigma_d``): ``sqrt(tr Cov / N)`` of the mixture."""
        g = self.gmm
        w = g.log_weights.exp()
        mean = (w[:, None] * g.means).sum(0)
        spread = (w * (g.evals.sum(-1) + ((g.means - mean) ** 2).sum(-1))).sum()  # E||y - E y||^2
        return float((spread / g.dim).sqrt())

    def denoise(self, x: torch.Tensor, sigma: Any) -> torch.Tensor:
        """Exact PFGM++ posterior mean (float64) at ``sigma`` (scalar or ``(B,)``; ``r = sigma sqrt(D)``), differentiable in ``x``."""
        self.calls += 1
        sig = sigma if torch.is_tensor(sigma) else float(sigma)
        return pfgmpp_denoise(self.gmm, x.double(), sig, self.D, nodes=self.nodes)

    def prior(self, n: int, sigma_max: float, generator: torch.Generator | None = None) -> torch.Tensor:
        return pfgmpp_noise(n, self.dim, sigma_max, self.D, generator)


@factory(params=TeacherConfig)
def analytic_pfgmpp(mixture: str = "gmm3", D: Any = 128, nodes: int = 201) -> AnalyticPFGMPP:
    """Factory for specs (``source: zoo``): the exact PFGM++ teacher of a named toy mixture at ``D``."""
    return AnalyticPFGMPP(mixture, D, nodes).eval()


def edm_coefficients(sigma: torch.Tensor, sigma_d: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``c_skip, c_out, c_in, c_noise`` of EDM (Karras et al. 2022, Table 1), shaped ``(B, 1)`` (c_noise ``(B,)``)."""
    s = sigma.reshape(-1, 1)
    c_skip = sigma_d**2 / (s**2 + sigma_d**2)
    c_out = s * sigma_d / (s**2 + sigma_d**2).sqrt()
    c_in = 1 / (s**2 + sigma_d**2).sqrt()
    return c_skip, c_out, c_in, sigma.reshape(-1).log() / 4


class EDMField(nn.Module):
    """A learned field ``f(x, sigma)`` with EDM preconditioning around an :class:`MLPDenoiser` (float32).

    Used both as the fake field ``f_psi`` and, evaluated at the fixed ``sigma_init``, as the one-step generator
    ``G_theta(z) = f_theta(z, sigma_init)`` (the SiD / IPFM generator parameterisation).
    """

    def __init__(self, dim: int, sigma_data: float, width: int = 128, layers: int = 3):
        super().__init__()
        self.sigma_data = float(sigma_data)
        self.net = MLPDenoiser(dim, 0, width, layers, time_dim=32)

    def forward(self, x: torch.Tensor, sigma: torch.Tensor | float) -> torch.Tensor:
        sig = torch.as_tensor(sigma, dtype=torch.float32).reshape(-1).expand(x.shape[0])
        c_skip, c_out, c_in, c_noise = edm_coefficients(sig, self.sigma_data)
        xf = x.float()
        return c_skip * xf + c_out * self.net(c_in * xf, 250.0 * c_noise)


# ----------------------------------------------------------------------------- EDM's Heun sampler
def karras_sigmas(num_steps: int, sigma_min: float = 0.002, sigma_max: float = 80.0, rho: float = 7.0) -> list[float]:
    """EDM's grid ``sigma_i = (s_max^{1/rho} + i/(N-1) (s_min^{1/rho} - s_max^{1/rho}))^rho``, i = 0..N-1, then 0."""
    if num_steps == 1:
        return [sigma_max, 0.0]
    a, b = sigma_max ** (1 / rho), sigma_min ** (1 / rho)
    return [(a + i / (num_steps - 1) * (b - a)) ** rho for i in range(num_steps)] + [0.0]


@dataclass
class SampleOutput(ProcedureOutput):
    """``samples`` ``(n, N)`` float64 and the model calls they cost (``nfe``)."""

    samples: Any = None
    nfe: Any = None


def heun_sample(model: Any, x_T: torch.Tensor, sigmas: list[float]) -> tuple[torch.Tensor, int]:
    """EDM's deterministic Heun sampler (Alg. 1, no churn) on ``sigmas`` (decreasing, ending at 0): returns (x_0, NFE)."""
    x, nfe = x_T.double(), 0
    for s, s_next in zip(sigmas[:-1], sigmas[1:]):
        d = (x - model.denoise(x, s)) / s
        nfe += 1
        x_euler = x + (s_next - s) * d
        if s_next > 0:
            d2 = (x_euler - model.denoise(x_euler, s_next)) / s_next
            nfe += 1
            x = x + (s_next - s) * 0.5 * (d + d2)
        else:
            x = x_euler
    return x, nfe


class ToySamplesCli:
    """``zoo run NAME --n N --out samples.png`` for a sampler of the 2-D toy (mixed into a ``Procedure`` whose
    ``__call__(seed=, num_samples=)`` returns a :class:`SampleOutput`): the header line of :meth:`cli_head`, the output
    summary, then the samples scored against the ``teacher`` role's exact data law (``samples_report``)."""

    CliInputs = SamplesCli

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"num_samples": batch_size}

    def cli_head(self, out: SampleOutput, n: int) -> str:
        raise NotImplementedError

    def run_cli(self, inputs: Any, seed: int) -> str:
        from .toys2d import samples_report

        ci = inputs if inputs is not None else self.CliInputs()
        out = self(seed=seed, num_samples=ci.n)  # type: ignore[operator]
        head = self.cli_head(out, ci.n)
        lines = [head, summarize(out)]
        gmm = getattr(self.models["teacher"], "gmm", None)  # type: ignore[attr-defined]
        if gmm is not None:
            lines += samples_report(gmm, out.samples, seed, ci.out, title=head)
        return "\n".join(lines)


# ----------------------------------------------------------------------------- sample quality on the toy
#: NFE -> Heun grid points (NFE = 2 N - 1; 35 = the paper's CIFAR-10 setting)
NFE_STEPS = {5: 3, 9: 5, 17: 9, 35: 18}


@torch.no_grad()
def quality(samples: torch.Tensor, teacher: AnalyticPFGMPP, reference: torch.Tensor, seed: int = 0) -> dict[str, float]:
    """``sw2``: sliced Wasserstein-2 to exact data samples (128 projections, fixed seed); ``loglik``: mean exact data
    log-density of the samples."""
    s = samples.double()
    n = min(s.shape[0], reference.shape[0])
    sw = sliced_wasserstein2(s[:n], reference[:n], 128, torch.Generator().manual_seed(seed))
    return {"sw2": sw, "loglik": float(teacher.gmm.log_prob(s).mean())}


def teacher_quality(teacher: AnalyticPFGMPP, nfe: int, n: int = 2000, seed: int = 0) -> dict[str, float]:
    """SW2 / log-likelihood of ``n`` PFGM++ Heun samples at ``nfe`` (5, 9, 17 or 35) from the heavy-tailed prior at
    sigma_max = 80 (prior seed ``seed + 5``, reference data seed ``seed + 1``)."""
    if nfe not in NFE_STEPS:
        raise ValueError(f"nfe must be one of {sorted(NFE_STEPS)}, got {nfe}")
    ref = teacher.gmm.sample(n, torch.Generator().manual_seed(seed + 1))
    x, used = heun_sample(teacher, teacher.prior(n, 80.0, torch.Generator().manual_seed(seed + 5)), karras_sigmas(NFE_STEPS[nfe]))
    assert used == nfe
    return quality(x, teacher, ref)


def data_quality(teacher: AnalyticPFGMPP, n: int = 2000, seed: int = 0) -> dict[str, float]:
    """The same measures for independent exact data samples (the floor of SW2 at this n, the data's own log-lik)."""
    ref = teacher.gmm.sample(n, torch.Generator().manual_seed(seed + 1))
    return quality(teacher.gmm.sample(n, torch.Generator().manual_seed(seed + 7)), teacher, ref)
