"""The shipped IPFM toy generator: a one-step ``G(z) = f_theta(z, sigma_init)`` (an EDM-preconditioned MLP) distilled
from the exact PFGM++ teacher of gmm3 at D = 16 by ``zoo train ipfm``, and its one-step sampler."""
from __future__ import annotations

from typing import Annotated, Literal

import torch
from pydantic import Field

from registry.contract import Procedure, factory
from registry.limits import Rows
from zoo.common.pfgmpp import AnalyticPFGMPP, EDMField, SampleOutput, ToySamplesCli

from .distill import generator_samples
from .params import BuildGeneratorConfig, OneStepSamplerParams


@factory(params=BuildGeneratorConfig)
def build_generator(mixture: Literal["gmm3", "gaussian", "ring8"] = "gmm3", width: Annotated[int, Field(ge=4, le=4096)] = 64,
                    layers: Annotated[int, Field(ge=1, le=16)] = 3) -> EDMField:
    """An untrained generator network of the shipped shape (weights come from the spec's safetensors file)."""
    sd = AnalyticPFGMPP(mixture, "inf").sigma_data
    return EDMField(2, sd, width, layers).eval()


class OneStepSampler(ToySamplesCli, Procedure):
    """One model call: ``z`` = PFGM++ kernel sample around 0 at ``sigma_init`` with the teacher role's D, ``x = G(z)``."""

    kind = "sampler"

    Params = OneStepSamplerParams

    def __call__(self, *, seed: int = 0, num_samples: Rows = 256) -> SampleOutput:
        gen, teacher = self.models["generator"], self.models["teacher"]
        with torch.no_grad():
            x = generator_samples(gen, num_samples, teacher.D, self.params.sigma_init, torch.Generator().manual_seed(seed))
        return SampleOutput(samples=x.double(), nfe=1)

    def cli_head(self, out: SampleOutput, n: int) -> str:
        """``zoo run ipfm --sampler one-step --n 2000 --out samples.png``: one model call per sample, scored exactly."""
        return f"one-step generator (teacher D = {self.models['teacher'].D:g}), {n} samples, NFE 1"
