"""The diffusers pipeline loop, general form: conditioning kwargs, classifier-free guidance and
learned-sigma output channels.

It is the loop of diffusers' ``DiTPipeline`` / Stable-Diffusion pipelines::

    scheduler.set_timesteps(N)
    x = x_T * scheduler.init_noise_sigma
    for t in scheduler.timesteps:
        out = model(scheduler.scale_model_input(x, t), t, **model_kwargs).sample
        x = scheduler.step(out, t, x).prev_sample

with two additions that DiT-style models need:

* **learned sigma**: a model whose output has twice the input channels (DiT, Peebles & Xie,
  arXiv 2212.09748, sec. 3.1: the second half parametrises the variance interpolation, Nichol &
  Dhariwal arXiv 2102.09672 eq. 15) passes the full output to schedulers whose ``variance_type`` is
  ``learned`` / ``learned_range`` and only the first half to every other scheduler;
* **classifier-free guidance** (Ho & Salimans, arXiv 2207.12598, eq. 6):
  ``eps = eps_uncond + w (eps_cond - eps_uncond)`` on the epsilon channels (the learned-sigma channels
  are taken from the conditional half, as in ``DiTPipeline``); the conditional and unconditional
  calls run as one batch of ``2B``.

``model`` is any diffusers-style callable ``model(sample, timestep, **kwargs)`` returning an object with
``.sample`` (or a tensor). The timestep is passed as a ``(B,)`` tensor (``DiTPipeline``), or as the scheduler's own
0-d timestep with ``batch_timesteps=False`` (``DDPMPipeline``; what :func:`run_scheduler` does).

This is the zoo's one scheduler loop: :func:`run_scheduler` (the plain form every
:class:`~zoo.common.scheduler_samplers.SchedulerSampler` runs, F-DPMSolver's included) is this loop with the
scalar timestep and the caller's grad mode.
"""
from __future__ import annotations

import inspect
from typing import Any, Mapping

import torch

__all__ = ["run_scheduler_loop", "run_scheduler", "split_learned_sigma", "model_output"]

_LEARNED = ("learned", "learned_range")


def model_output(out: Any) -> torch.Tensor:
    """``out.sample`` for diffusers outputs, ``out[0]`` for tuples, ``out`` for tensors."""
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "sample"):
        return out.sample
    return out[0]


def split_learned_sigma(out: torch.Tensor, channels: int, scheduler: Any = None) -> torch.Tensor:
    """Keep only the first ``channels`` output channels unless the scheduler consumes learned variances."""
    if out.shape[1] == 2 * channels:
        variance_type = getattr(getattr(scheduler, "config", None), "variance_type", None) if scheduler is not None else None
        if variance_type in _LEARNED:
            return out
        return out[:, :channels]
    if out.shape[1] != channels:
        raise ValueError(f"model output has {out.shape[1]} channels; expected {channels} or {2 * channels} (learned sigma)")
    return out


def _cat_kwargs(cond: Mapping[str, Any], uncond: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in cond.items():
        u = uncond.get(k, v)
        out[k] = torch.cat([v, u]) if isinstance(v, torch.Tensor) else v
    return out


def run_scheduler_loop(scheduler: Any, model: Any, x_T: torch.Tensor, num_inference_steps: int, model_kwargs: Mapping[str, Any] | None = None,
                       guidance_scale: float = 1.0, uncond_kwargs: Mapping[str, Any] | None = None, generator: torch.Generator | None = None,
                       progress: bool = False, with_grad: bool = False, batch_timesteps: bool = True) -> torch.Tensor:
    """Sample from ``x_T`` (unit-variance noise, shape ``(B, C, ...)``) with ``scheduler`` and ``model``.

    ``model_kwargs`` (e.g. ``{"class_labels": labels}``) are passed to every call. With
    ``guidance_scale != 1`` the unconditional kwargs ``uncond_kwargs`` (e.g. the null class) are batched
    with the conditional ones and combined by classifier-free guidance. ``generator`` is forwarded to
    the ``step`` of schedulers that take one (stochastic ones). ``with_grad=True`` keeps the autograd graph through the chain.
    ``batch_timesteps=False`` passes the scheduler's timestep ``t`` to the model as it is (not expanded to ``(B,)``).
    """
    kwargs = dict(model_kwargs or {})
    cfg = guidance_scale != 1.0
    if cfg and uncond_kwargs is None:
        raise ValueError("guidance_scale != 1 needs uncond_kwargs (e.g. the null class labels)")
    scheduler.set_timesteps(num_inference_steps)
    x = x_T * scheduler.init_noise_sigma
    B, C = x.shape[0], x.shape[1]
    call_kwargs = _cat_kwargs(kwargs, dict(uncond_kwargs)) if cfg else kwargs
    ts = scheduler.timesteps
    if progress:
        from tqdm.auto import tqdm

        ts = tqdm(ts, desc=type(scheduler).__name__, leave=False)
    takes_generator = "generator" in inspect.signature(scheduler.step).parameters
    step_kw = {"generator": generator} if generator is not None and takes_generator else {}
    with torch.set_grad_enabled(with_grad):
        for t in ts:
            inp = scheduler.scale_model_input(x, t)
            if cfg:
                inp = torch.cat([inp, inp])
            tt = torch.as_tensor(t, device=x.device).reshape(-1).expand(inp.shape[0]) if batch_timesteps else t
            out = model_output(model(inp, tt, **call_kwargs))
            if cfg:
                eps, rest = out[:, :C], out[:, C:]
                e_c, e_u = eps[:B], eps[B:]
                out = torch.cat([e_u + guidance_scale * (e_c - e_u), rest[:B]], dim=1)
            out = split_learned_sigma(out, C, scheduler)
            x = scheduler.step(out, t, x, **step_kw).prev_sample
    return x


def run_scheduler(scheduler: Any, model: Any, x_T: torch.Tensor, num_inference_steps: int, progress: bool = False) -> torch.Tensor:
    """The plain pipeline loop (``DDPMPipeline`` + ``scale_model_input``): :func:`run_scheduler_loop` with the
    scheduler's own timestep passed to the model, no conditioning, in the caller's grad mode; returns the final sample."""
    return run_scheduler_loop(scheduler, model, x_T, num_inference_steps, progress=progress, with_grad=torch.is_grad_enabled(),
                              batch_timesteps=False)
