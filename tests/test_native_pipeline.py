"""``pipe.native`` of a scheduler sampler is a real ``diffusers.DDPMPipeline``
with the method's scheduler (F-DPMSolver: ``FDPMSolverScheduler``) and the built UNet, giving the zoo
call's sample for the same seed; tested on a tiny local UNet2DModel (no hub)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from registry.errors import RunError

TINY = dict(sample_size=8, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=[8, 16],
            down_block_types=["DownBlock2D", "DownBlock2D"], up_block_types=["UpBlock2D", "UpBlock2D"], norm_num_groups=4)

SPEC = """name: tiny-fdpm
title: F-DDIM on a tiny local UNet
task: unconditional-sampling
implementation: zoo.methods.f_dpmsolver
models:
  denoiser:
    kind: vp-diffusion-model
    variants:
      local: {source: diffusers, model_class: UNet2DModel, id: ./tiny-unet, dtype: float32}
samplers:
  f-ddim: {target: "zoo.methods.f_dpmsolver:FDPMSolverSampler", params: {num_inference_steps: 6}}
  f-ddim-halfsum: {target: "zoo.methods.f_dpmsolver:FDPMHalfSumSampler", params: {num_inference_steps: 6}}
  ddim: {target: "zoo.methods.diffusers_baselines:DDIMSampler", params: {num_inference_steps: 6}}
default: f-ddim
variants: [local]
hardware: {local: {accelerator: cpu}}
"""


@pytest.fixture(scope="module")
def pipe(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from diffusers import UNet2DModel

    import zoo
    from registry.context import build_pipeline
    from registry.loader import load_spec_file

    d = tmp_path_factory.mktemp("native")
    torch.manual_seed(0)
    UNet2DModel(**TINY).save_pretrained(d / "tiny-unet")
    (d / "tiny-fdpm.yaml").write_text(SPEC)
    assert zoo  # the package's plugins are registered
    return build_pipeline(load_spec_file(d / "tiny-fdpm.yaml"), file=d / "tiny-fdpm.yaml", device="cpu")


def test_native_is_a_ddpm_pipeline_with_the_method_scheduler(pipe: Any) -> None:
    from diffusers import DDPMPipeline

    from zoo.methods.f_dpmsolver import FDPMSolverScheduler

    native = pipe.native
    assert isinstance(native, DDPMPipeline) and isinstance(native.scheduler, FDPMSolverScheduler)
    assert native.unet is pipe.models["denoiser"]  # the built model, not a reload
    assert native.scheduler is not pipe.procedure.scheduler and native.scheduler.config == pipe.procedure.scheduler.config


@pytest.mark.parametrize("sampler", ["f-ddim", "ddim"])
def test_native_gives_the_zoo_sample_for_the_same_seed(pipe: Any, sampler: str) -> None:
    proc = pipe.procedures[sampler]
    ours = proc(seed=7, batch_size=2).samples
    native = proc.native()
    latent = native(batch_size=2, generator=torch.Generator().manual_seed(7), num_inference_steps=6, output_type="latent").images
    assert torch.equal(latent, ours)
    images = native(batch_size=2, generator=torch.Generator().manual_seed(7), num_inference_steps=6, output_type="np").images
    np.testing.assert_array_equal(images, (ours / 2 + 0.5).clamp(0, 1).permute(0, 2, 3, 1).numpy())
    other = native(batch_size=2, generator=torch.Generator().manual_seed(8), num_inference_steps=6, output_type="latent").images
    assert not torch.equal(other, ours)
    assert torch.equal(proc(seed=7, batch_size=2).samples, ours)  # running the native pipeline left the zoo's untouched


def test_no_native_pipeline_is_one_line(pipe: Any) -> None:
    with pytest.raises(ValueError, match="half-sum sampler has no native"):
        pipe.procedures["f-ddim-halfsum"].native()
    import zoo

    toy = zoo.load("f-dpmsolver", variant="toy")
    with pytest.raises(RunError, match="no native diffusers pipeline for a non-image model") as exc:
        toy.native
    assert "\n" not in str(exc.value)
