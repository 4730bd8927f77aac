"""The PFGM++ teacher sampler of spec ``pfgmpp`` (the spec's own glue around :mod:`zoo.common.pfgmpp`).

PFGM++ (Xu et al., arXiv 2302.04265, sec. 4 and Alg. 2; github.com/Newbeeer/pfgmpp ``generate.py``): with the
alignment ``r = sigma sqrt(D)`` the backward ODE ``dx/dr = (x - E_{p_r}[y | x]) / r`` is EDM's probability-flow ODE
``dx/dsigma = (x - D(x; sigma)) / sigma`` with the PFGM++ posterior mean as ``D``; it is solved with EDM's Heun
sampler on the Karras grid (:func:`zoo.common.pfgmpp.heun_sample`, :func:`zoo.common.pfgmpp.karras_sigmas`). The
only change from diffusion is the prior: ``x_T`` is a kernel sample around 0 at ``r_max = sigma_max sqrt(D)``
(heavy-tailed radius, ``R = r sqrt(b / (1 - b))``, ``b ~ Beta(N/2, D/2)``), not ``sigma_max N(0, I)``.
"""
from __future__ import annotations

from typing import Annotated

import torch

from registry.contract import Procedure
from registry.limits import Bound, Rows
from zoo.common.pfgmpp import SampleOutput, ToySamplesCli, heun_sample, karras_sigmas

from .params import PFGMPPSamplerParams


class PFGMPPSampler(ToySamplesCli, Procedure):
    """PFGM++ sampling: heavy-tailed prior at ``r_max = sigma_max sqrt(D)`` + Heun on the Karras grid (D from the model)."""

    kind = "sampler"

    Params = PFGMPPSamplerParams

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

    def cli_head(self, out: SampleOutput, n: int) -> str:
        """``zoo run pfgmpp --n 2000 --out samples.png``: sample, then score against the exact data law."""
        teacher, p = self.models["teacher"], self.params
        return f"PFGM++ Heun (D = {getattr(teacher, 'D', '?')}, {p.prior} prior, NFE {out.nfe}), {n} samples"
