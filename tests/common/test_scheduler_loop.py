"""The general scheduler loop: equals the plain pipeline loop without conditioning, handles learned-sigma
channels and classifier-free guidance exactly as defined."""
from __future__ import annotations

import torch
from diffusers import DDIMScheduler, DDPMScheduler

from zoo.common.gmm import analytic_model
from zoo.common.scheduler_loop import run_scheduler_loop, split_learned_sigma


def _plain_loop(scheduler, model, x, n):
    scheduler.set_timesteps(n)
    x = x * scheduler.init_noise_sigma
    for t in scheduler.timesteps:
        x = scheduler.step(model(scheduler.scale_model_input(x, t), t).sample, t, x).prev_sample
    return x


def test_loop_without_conditioning_equals_pipeline_loop():
    """With no kwargs and guidance 1 the loop is bit-identical to the diffusers pipeline loop (analytic model)."""
    m = analytic_model("gmm3")
    x = torch.randn(16, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    a = run_scheduler_loop(DDIMScheduler(clip_sample=False), m, x, 10)
    b = _plain_loop(DDIMScheduler(clip_sample=False), m, x, 10)
    assert torch.equal(a, b)


class _Fake(torch.nn.Module):
    """eps = class_label * 0.01 * x in the first C channels, a constant in the learned-sigma channels."""

    def __init__(self, learned: bool):
        super().__init__()
        self.learned = learned
        self.calls = []

    def forward(self, x, t, class_labels=None):
        self.calls.append(class_labels.clone())
        eps = x * (0.01 * class_labels.double()).reshape(-1, 1, 1, 1)
        out = torch.cat([eps, torch.full_like(x, 0.5)], 1) if self.learned else eps
        return type("O", (), {"sample": out})()


def test_learned_sigma_split_and_guidance():
    """A 2C-channel output is cut to C for a fixed-variance scheduler and kept whole for variance_type
    'learned_range'; guidance w combines eps_u + w (eps_c - eps_u) from one batched call of 2B rows."""
    x = torch.randn(3, 1, 4, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    out = torch.cat([x, x], 1)
    assert split_learned_sigma(out, 1, DDIMScheduler()).shape[1] == 1
    assert split_learned_sigma(out, 1, DDPMScheduler(variance_type="learned_range")).shape[1] == 2
    labels = torch.tensor([1, 2, 3])
    m = _Fake(learned=True)
    y = run_scheduler_loop(DDIMScheduler(clip_sample=False), m, x, 5, {"class_labels": labels}, guidance_scale=3.0,
                           uncond_kwargs={"class_labels": torch.zeros(3, dtype=torch.int64)})
    assert m.calls[0].tolist() == [1, 2, 3, 0, 0, 0]
    # reference: eps_u = 0, so the guided eps is 3 * eps_c = x * 0.03 * label, i.e. a model with labels 3, 6, 9
    ref = run_scheduler_loop(DDIMScheduler(clip_sample=False), _Fake(learned=False), x, 5, {"class_labels": labels * 3})
    assert torch.allclose(y, ref, atol=1e-12)


def test_generator_only_reaches_schedulers_that_take_it():
    """UniPC's step takes no generator: the loop still runs with one; DDPM (stochastic) is seed-reproducible."""
    from diffusers import UniPCMultistepScheduler

    m = analytic_model("gmm3")
    x = torch.randn(4, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    run_scheduler_loop(UniPCMultistepScheduler(), m, x, 4, generator=torch.Generator().manual_seed(1))
    a = run_scheduler_loop(DDPMScheduler(clip_sample=False), m, x, 4, generator=torch.Generator().manual_seed(1))
    b = run_scheduler_loop(DDPMScheduler(clip_sample=False), m, x, 4, generator=torch.Generator().manual_seed(1))
    c = run_scheduler_loop(DDPMScheduler(clip_sample=False), m, x, 4, generator=torch.Generator().manual_seed(2))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_run_scheduler_is_the_one_loop_with_the_schedulers_own_timestep():
    """`run_scheduler` (what every SchedulerSampler runs) is `run_scheduler_loop` with the scheduler's 0-d timestep
    handed to the model unchanged and the caller's grad mode: a model that only takes a scalar timestep works, the
    samples equal the plain pipeline loop and the batched-timestep loop bit for bit, and the old
    `zoo.methods.diffusers_baselines` path is the same function (a deprecated alias)."""
    import warnings

    from zoo.common.scheduler_loop import run_scheduler
    from zoo.common.scheduler_samplers import vp_config

    m = analytic_model("gmm3")
    seen: list[tuple[int, ...]] = []

    class ScalarOnly(torch.nn.Module):
        def forward(self, x, t):
            seen.append(tuple(torch.as_tensor(t).shape))
            return m(x, float(t))  # float() of a (B,) tensor with B > 1 would raise

    x = torch.randn(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    sch = lambda: DDIMScheduler(**vp_config(m), clip_sample=False, timestep_spacing="trailing")  # noqa: E731
    a = run_scheduler(sch(), ScalarOnly(), x, 7)
    assert seen == [()] * 7
    assert torch.equal(a, _plain_loop(sch(), m, x, 7)) and torch.equal(a, run_scheduler_loop(sch(), m, x, 7))
    xg = x.clone().requires_grad_(True)
    assert run_scheduler(sch(), m, xg, 3).requires_grad and not run_scheduler_loop(sch(), m, xg, 3).requires_grad
    with torch.no_grad():
        assert not run_scheduler(sch(), m, xg, 3).requires_grad
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from zoo.methods.diffusers_baselines.sampler import run_scheduler as old
    assert old is run_scheduler and any("zoo.common.scheduler_loop.run_scheduler" in str(w.message) for w in caught)
