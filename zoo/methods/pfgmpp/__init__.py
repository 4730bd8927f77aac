"""PFGM++ (Xu et al., arXiv 2302.04265) on the exact Gaussian-mixture testbed: the analytic teacher (exact posterior
mean for any D) and the teacher sampler (heavy-tailed prior + EDM Heun). The baseline spec of ``ipfm``."""
from .sampler import PFGMPPSampler, SampleOutput, heun_sample, karras_sigmas
from .toy import AnalyticPFGMPP, EDMField, analytic_pfgmpp

__all__ = ["PFGMPPSampler", "SampleOutput", "heun_sample", "karras_sigmas", "AnalyticPFGMPP", "EDMField", "analytic_pfgmpp"]
