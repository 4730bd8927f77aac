"""EGT — Equalized Generative Treatment (Vérine, Pinot, Le Bronnec, ICML 2026, arXiv 2602.08660):
per-group f-divergences, the δ-EGT diagnostic, and min–max fine-tuning (worst EMA group, or
exponentiated-gradient group weights) against ERM and a proportion-based fairness baseline, on a
closed-form Gaussian toy and, as a named proxy, on the shared digits DiT."""
from typing import TYPE_CHECKING

from zoo.common.lazy import lazy_exports

if TYPE_CHECKING:
    from .divergences import (
        CLOSED_FORM, DIVERGENCES, egt_gap, f_divergence, gaussian_divergence, gaussian_kl, is_delta_egt, mc_f_divergence, proportion_gap,
    )
    from .gaussian import ALGORITHMS, GaussianGroups, GroupModel, eg_update, exact_minmax, finetune, group_kls, note_toy, summary, weighted_mle
    from .procedures import DDPMOutput, DigitsFairness, DigitsOutput, EGTOutput, GaussianFairness, MixtureDDPMFairness

__all__ = [
    "ALGORITHMS", "CLOSED_FORM", "DDPMOutput", "DIVERGENCES", "DigitsFairness", "DigitsOutput", "EGTOutput", "GaussianFairness", "GaussianGroups",
    "GroupModel", "eg_update", "egt_gap", "exact_minmax", "f_divergence", "finetune", "gaussian_divergence", "gaussian_kl", "group_kls",
    "is_delta_egt", "MixtureDDPMFairness", "mc_f_divergence", "note_toy", "proportion_gap", "summary", "weighted_mle",
]
__getattr__, __dir__ = lazy_exports(__name__, {
    "CLOSED_FORM": ".divergences", "DIVERGENCES": ".divergences", "egt_gap": ".divergences", "f_divergence": ".divergences", "gaussian_divergence": ".divergences",
    "gaussian_kl": ".divergences", "is_delta_egt": ".divergences", "mc_f_divergence": ".divergences", "proportion_gap": ".divergences",
    "ALGORITHMS": ".gaussian", "GaussianGroups": ".gaussian", "GroupModel": ".gaussian", "eg_update": ".gaussian", "exact_minmax": ".gaussian",
    "finetune": ".gaussian", "group_kls": ".gaussian", "note_toy": ".gaussian", "summary": ".gaussian", "weighted_mle": ".gaussian",
    "DDPMOutput": ".procedures", "DigitsFairness": ".procedures", "DigitsOutput": ".procedures", "EGTOutput": ".procedures", "GaussianFairness": ".procedures",
    "MixtureDDPMFairness": ".procedures",
})
