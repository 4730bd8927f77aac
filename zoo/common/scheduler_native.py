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

``save_pretrained`` writes what ``diffusers.DiffusionPipeline.from_pretrained`` loads: ``model_index.json``
names ``DDPMPipeline`` (a zoo subclass name would not resolve), the UNet and the scheduler with its class and
config. diffusers' own ``DDPMPipeline`` loop never calls ``scale_model_input``, which an F-DPMSolver scheduler
with a free first guess (``first_eps`` "approx" or "mean") needs for its first look-ahead point, so such a
scheduler is saved with ``first_eps="evaluate"`` (one extra model call; the documented setting that runs in
every pipeline) and a warning says so.
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import torch
from diffusers import DDPMPipeline
from diffusers.pipelines.pipeline_utils import ImagePipelineOutput

from .scheduler_samplers import sample_shape


class SchedulerPipeline(DDPMPipeline):
    """``DDPMPipeline(unet, scheduler)`` running the zoo's scheduler loop (see the module docstring)."""

    def save_pretrained(self, save_directory: str | os.PathLike[str], *args: Any, **kwargs: Any) -> None:
        """``DiffusionPipeline.save_pretrained``, saved as a plain ``DDPMPipeline`` that diffusers loads and runs
        (module docstring): the class name in ``model_index.json``, and ``first_eps="evaluate"`` for an
        F-DPMSolver scheduler that would need ``scale_model_input``."""
        super().save_pretrained(save_directory, *args, **kwargs)
        root = Path(save_directory)
        index = json.loads((root / "model_index.json").read_text())
        index["_class_name"] = DDPMPipeline.__name__
        (root / "model_index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
        cfg_file = root / "scheduler" / "scheduler_config.json"
        cfg = json.loads(cfg_file.read_text())
        if cfg.get("first_eps") in ("approx", "mean"):
            warnings.warn(f"saved the scheduler with first_eps='evaluate' (was {cfg['first_eps']!r}): diffusers' DDPMPipeline "
                          "never calls scale_model_input, which the free first guess needs; one extra model call", UserWarning,
                          stacklevel=2)
            cfg["first_eps"] = "evaluate"
            cfg_file.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")

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
