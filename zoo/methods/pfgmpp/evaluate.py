"""Sample-quality measures of the PFGM++ / IPFM toys: sliced Wasserstein-2 to exact data samples and the exact data
log-likelihood of the samples (testbed section 1d), and the teacher sampler's quality at a given NFE."""
from __future__ import annotations

import torch

from zoo.common.gmm import sliced_wasserstein2

from .sampler import heun_sample, karras_sigmas
from .toy import AnalyticPFGMPP

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


