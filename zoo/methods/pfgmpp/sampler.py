"""The PFGM++ teacher sampler (spec ``pfgmpp``) and the IPFM one-step sampler.

PFGM++ (Xu et al., arXiv 2302.04265, sec. 4 and Alg. 2; github.com/Newbeeer/pfgmpp ``generate.py``): with the
alignment ``r = sigma sqrt(D)`` the backward ODE ``dx/dr = (x - E_{p_r}[y | x]) / r`` is EDM's probability-flow ODE
``dx/dsigma = (x - D(x; sigma)) / sigma`` with the PFGM++ posterior mean as ``D``; it is solved with EDM's Heun
sampler on the Karras grid (Karras et al., arXiv 2206.00364, Alg. 1; N steps = 2N - 1 model calls). The only change
from diffusion is the prior: ``x_T`` is a kernel sample around 0 at ``r_max = sigma_max sqrt(D)`` (heavy-tailed
radius, ``R = r sqrt(b / (1 - b))``, ``b ~ Beta(N/2, D/2)``), not ``sigma_max N(0, I)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import torch
from pydantic import Field, model_validator

from registry.contract import Procedure, ProcedureParams, summarize
from registry.limits import Bound, Rows
from registry.outputs import ProcedureOutput
from zoo.common.output import SamplesCli



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


class PFGMPPSampler(Procedure):
    """PFGM++ sampling: heavy-tailed prior at ``r_max = sigma_max sqrt(D)`` + Heun on the Karras grid (D from the model)."""

    kind = "sampler"

    class Params(ProcedureParams):
        num_steps: int = Field(18, ge=1, le=1000, description="Karras grid points; NFE = 2 num_steps - 1 (18 -> 35, the paper's CIFAR-10)")
        sigma_min: float = Field(0.002, gt=0, le=10.0)
        sigma_max: float = Field(80.0, gt=0, le=1e4)
        rho: float = Field(7.0, gt=0, le=100.0)
        prior: str = Field("pfgmpp", pattern="^(pfgmpp|gaussian)$", description="pfgmpp (the paper) or gaussian (ablation: the diffusion prior with a finite-D field)")

        @model_validator(mode="after")
        def _range(self):
            if self.sigma_min >= self.sigma_max:
                raise ValueError("sigma_min must be < sigma_max")
            return self

    def __call__(self, *, seed: int = 0, num_samples: Rows = 256, x_T: Annotated[torch.Tensor, Bound("rows")] | None = None) -> SampleOutput:
        model, p = self.models["teacher"], self.params
        if not hasattr(model, "denoise") or not hasattr(model, "prior"):
            raise ValueError("pfgmpp sampler: the teacher must expose denoise(x, sigma) and prior(n, sigma_max)")
        if x_T is None:
            g = torch.Generator().manual_seed(seed)
            if p.prior == "pfgmpp":
                x_T = model.prior(num_samples, p.sigma_max, g)
            else:
                x_T = p.sigma_max * torch.randn(num_samples, model.dim, dtype=torch.float64, generator=g)
        x, nfe = heun_sample(model, x_T, karras_sigmas(p.num_steps, p.sigma_min, p.sigma_max, p.rho))
        return SampleOutput(samples=x, nfe=nfe)

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"num_samples": batch_size}

    CliInputs = SamplesCli

    def run_cli(self, inputs: Any, seed: int) -> str:
        """``zoo run pfgmpp --n 2000 --out samples.png``: sample, then score against the exact data law."""
        from zoo.common.toys2d import samples_report

        ci = inputs if inputs is not None else self.CliInputs()
        out = self(seed=seed, num_samples=ci.n)
        teacher, p = self.models["teacher"], self.params
        head = f"PFGM++ Heun (D = {getattr(teacher, 'D', '?')}, {p.prior} prior, NFE {out.nfe}), {ci.n} samples"
        lines = [head, summarize(out)]
        gmm = getattr(teacher, "gmm", None)
        if gmm is not None:
            lines += samples_report(gmm, out.samples, seed, ci.out, title=head)
        return "\n".join(lines)
