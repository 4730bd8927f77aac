"""The native diffusers object of a scheduler sampler (issue #11 item 14): ``pipe.native`` is a
``diffusers.DDPMPipeline`` holding the built UNet and the sampler's own scheduler (for F-DPMSolver an
:class:`~zoo.methods.f_dpmsolver.scheduler.FDPMSolverScheduler`), usable as users know it
(``.to()``, ``.components``, ``save_pretrained``, ``output_type="pil"|"np"|"pt"|"latent"``,
``ImagePipelineOutput``).

Its ``__call__`` is DDPMPipeline's with two changes, so that the same seed gives the zoo call's
sample bit for bit: the loop calls ``scheduler.scale_model_input`` before the model (diffusers' SD/DiT
convention, which F-DPMSolver's first look-ahead point needs; DDPMPipeline's own loop skips it), and
``x_T`` is drawn as the zoo samplers draw it (a float64 normal from the generator, cast to the UNet's
dtype) unless ``latents`` are given.
"""
from __future__ import annotations

from typing import Any

import torch
from diffusers import DDPMPipeline
from diffusers.pipelines.pipeline_utils import ImagePipelineOutput

from .sampler import sample_shape


class SchedulerPipeline(DDPMPipeline):
    """``DDPMPipeline(unet, scheduler)`` running the zoo's scheduler loop (see the module docstring)."""

    @torch.no_grad()
    def __call__(self, batch_size: int = 1, generator: torch.Generator | None = None, num_inference_steps: int = 10,
                 output_type: str = "pil", return_dict: bool = True, latents: torch.Tensor | None = None) -> Any:
        if latents is None:
            g = generator if generator is not None else torch.Generator().manual_seed(0)
            latents = torch.randn((batch_size, *sample_shape(self.unet)), generator=g, dtype=torch.float64)
        x = latents.to(dtype=self.unet.dtype).to(self.device)
        self.scheduler.set_timesteps(num_inference_steps)
        x = x * self.scheduler.init_noise_sigma
        for t in self.progress_bar(self.scheduler.timesteps):
            out = self.unet(self.scheduler.scale_model_input(x, t), t).sample
            x = self.scheduler.step(out, t, x).prev_sample
        if output_type == "latent":
            image: Any = x
        else:
            image = (x / 2 + 0.5).clamp(0, 1)
            if output_type != "pt":
                image = image.cpu().permute(0, 2, 3, 1).float().numpy()
                if output_type == "pil":
                    image = self.numpy_to_pil(image)
        if not return_dict:
            return (image,)
        return ImagePipelineOutput(images=image)
