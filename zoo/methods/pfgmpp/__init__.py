"""PFGM++ (Xu et al., arXiv 2302.04265) on the exact Gaussian-mixture testbed: the spec's teacher sampler (heavy-tailed
prior + EDM Heun). The kernel, the analytic teacher (exact posterior mean for any D), the Heun solver and the toy's
measures live in :mod:`zoo.common.pfgmpp` (shared with ``ipfm``, whose teacher this is); their old paths here are
deprecated aliases."""
from typing import TYPE_CHECKING

from zoo.common.deprecation import install_aliases
from zoo.common.lazy import lazy_exports

if TYPE_CHECKING:
    from .sampler import PFGMPPSampler

__all__ = ["PFGMPPSampler"]

__deprecated_aliases__ = {
    "": {
        "AnalyticPFGMPP": "zoo.common.pfgmpp:AnalyticPFGMPP",
        "EDMField": "zoo.common.pfgmpp:EDMField",
        "SampleOutput": "zoo.common.pfgmpp:SampleOutput",
        "analytic_pfgmpp": "zoo.common.pfgmpp:analytic_pfgmpp",
        "heun_sample": "zoo.common.pfgmpp:heun_sample",
        "karras_sigmas": "zoo.common.pfgmpp:karras_sigmas",
    },
    "toy": {
        "AnalyticPFGMPP": "zoo.common.pfgmpp:AnalyticPFGMPP",
        "DValue": "zoo.common.pfgmpp:DValue",
        "EDMField": "zoo.common.pfgmpp:EDMField",
        "RING8": "zoo.common.pfgmpp:RING8",
        "TeacherConfig": "zoo.common.pfgmpp:TeacherConfig",
        "analytic_pfgmpp": "zoo.common.pfgmpp:analytic_pfgmpp",
        "as_D": "zoo.common.pfgmpp:as_D",
        "edm_coefficients": "zoo.common.pfgmpp:edm_coefficients",
        "make_mixture": "zoo.common.pfgmpp:make_mixture",
    },
    "evaluate": {
        "NFE_STEPS": "zoo.common.pfgmpp:NFE_STEPS",
        "data_quality": "zoo.common.pfgmpp:data_quality",
        "quality": "zoo.common.pfgmpp:quality",
        "teacher_quality": "zoo.common.pfgmpp:teacher_quality",
    },
}
__getattr__, __dir__ = lazy_exports(__name__, {"PFGMPPSampler": ".sampler"}, fallback=install_aliases(__name__, __deprecated_aliases__))
