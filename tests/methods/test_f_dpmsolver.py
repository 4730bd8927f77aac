"""Behaviour tests of FDPMSolverScheduler inside real diffusers pipelines and of the f-dpmsolver procedures.

The Hypothesis invariants themselves run through the conformance harness (``zoo check f-dpmsolver``);
here: diffusers integration (from_config swaps, DiTPipeline with CFG, DDIMPipeline/DDPMPipeline loops,
tiny random models, exact NFE counts), scheduler API edge cases, negative controls for the invariants,
and the zoo procedure / CLI surface.
"""
from __future__ import annotations

import math

import pytest
import torch

diffusers = pytest.importorskip("diffusers")
from diffusers import (  # noqa: E402
    AutoencoderKL,
    DDIMPipeline,
    DDIMScheduler,
    DDPMPipeline,
    DiTPipeline,
    DiTTransformer2DModel,
    DPMSolverMultistepScheduler,
    UNet2DModel,
)

from zoo.common.gmm import AnalyticDiffusionModel, GaussianMixture, analytic_model  # noqa: E402
from zoo.common.scheduler_loop import run_scheduler  # noqa: E402
from zoo.common.scheduler_samplers import DDIMSampler  # noqa: E402
from zoo.methods.f_dpmsolver import FDPMSolverSampler, FDPMSolverScheduler, fdpm_sample  # noqa: E402
from zoo.methods.f_dpmsolver import invariants as inv  # noqa: E402


class Counter:
    """Records every call (timestep, input) of a diffusers model through a forward pre-hook."""

    def __init__(self, model):
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []
        model.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, module, args, kwargs):
        sample = args[0] if args else kwargs.get("sample", kwargs.get("hidden_states"))
        t = args[1] if len(args) > 1 else kwargs["timestep"]
        self.calls.append((torch.as_tensor(t).clone(), sample.clone()))


def tiny_unet() -> UNet2DModel:
    torch.manual_seed(0)
    return UNet2DModel(
        sample_size=8, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(8, 16),
        down_block_types=("DownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "UpBlock2D"), norm_num_groups=4,
    ).eval()


def tiny_dit() -> tuple[DiTTransformer2DModel, AutoencoderKL]:
    torch.manual_seed(0)
    dit = DiTTransformer2DModel(
        num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=8, num_layers=1, norm_num_groups=4,
        sample_size=8, patch_size=2, num_embeds_ada_norm=1000,
    ).eval()
    # DiT zero-initialises nothing in diffusers, but make sure the output depends on the input and the time
    vae = AutoencoderKL(
        in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",), up_block_types=("UpDecoderBlock2D",),
        block_out_channels=(8,), latent_channels=4, norm_num_groups=8, layers_per_block=1,
    ).eval()
    return dit, vae


# ----------------------------------------------------------------------------- diffusers swaps


def test_from_ddim_config_keeps_the_training_schedule():
    src = DDIMScheduler(beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012, prediction_type="v_prediction")
    sch = FDPMSolverScheduler.from_config(src.config)
    assert sch.config.beta_schedule == "scaled_linear" and sch.config.prediction_type == "v_prediction"
    assert torch.allclose(sch.alphas_cumprod.float(), src.alphas_cumprod, atol=1e-6)
    assert "DDIMScheduler" in FDPMSolverScheduler._compatibles
    back = DDIMScheduler.from_config(sch.config)  # and the reverse swap
    assert back.config.prediction_type == "v_prediction"


def test_add_noise_matches_ddim_at_integer_timesteps():
    sch, ddim = FDPMSolverScheduler(), DDIMScheduler()
    x0, n = torch.randn(3, 2, 4, 4), torch.randn(3, 2, 4, 4)
    t = torch.tensor([0, 500, 999])
    assert torch.allclose(sch.add_noise(x0, n, t), ddim.add_noise(x0, n, t), atol=1e-5)


def test_save_and_reload_config(tmp_path):
    sch = FDPMSolverScheduler(solver_order=2, first_eps="evaluate", use_karras_sigmas=True, sigma_min=0.002, sigma_max=80.0)
    sch.save_pretrained(tmp_path)
    again = FDPMSolverScheduler.from_pretrained(tmp_path)
    strip = lambda c: {k: v for k, v in dict(c).items() if not k.startswith("_")}  # noqa: E731
    assert strip(again.config) == strip(sch.config)


def test_dit_pipeline_with_cfg_calls_the_model_n_times_at_t1_to_tN():
    """DiTPipeline (scale_model_input before the model, CFG doubling the batch): exactly N transformer calls,
    at t_1 ... t_N, the first one at the look-ahead point built from x_T (not at x_T)."""
    dit, vae = tiny_dit()
    counter = Counter(dit)
    pipe = DiTPipeline(transformer=dit, vae=vae, scheduler=DDIMScheduler())
    pipe.scheduler = FDPMSolverScheduler.from_config(pipe.scheduler.config)
    pipe.set_progress_bar_config(disable=True)
    N = 6
    g = torch.Generator().manual_seed(0)
    out = pipe(class_labels=[1, 3], guidance_scale=4.0, num_inference_steps=N, generator=g, output_type="pt").images
    assert out.shape == (2, 3, 8, 8) and torch.isfinite(out).all()
    assert len(counter.calls) == N
    grid = pipe.scheduler.grid_timesteps
    assert [int(t.reshape(-1)[0]) for t, _ in counter.calls] == [int(t) for t in grid[1:]]
    # the first model input is xhat_1 = c * x_T for the scalar c of an order-1 look-ahead with e_0 = x_T
    x_T = torch.randn((2, 4, 8, 8), generator=torch.Generator().manual_seed(0))
    a, s = pipe.scheduler.grid_alphas, pipe.scheduler.grid_vp_sigmas
    c = a[1] * (1 - s[0]) / a[0] + s[1]
    first = counter.calls[0][1]
    assert torch.allclose(first, torch.cat([x_T, x_T]) * c, atol=1e-5)
    assert not torch.allclose(first, torch.cat([x_T, x_T]), atol=1e-3)


def test_dit_pipeline_without_cfg_matches_the_direct_loop():
    """Without guidance the DiT pipeline's final latents equal the direct F-DPMSolver loop on the same eps."""
    dit, vae = tiny_dit()
    pipe = DiTPipeline(transformer=dit, vae=vae, scheduler=FDPMSolverScheduler())
    pipe.set_progress_bar_config(disable=True)
    N = 5
    out = pipe(class_labels=[2], guidance_scale=1.0, num_inference_steps=N, generator=torch.Generator().manual_seed(1), output_type="pt").images
    x_T = torch.randn((1, 4, 8, 8), generator=torch.Generator().manual_seed(1))
    sch = FDPMSolverScheduler()
    sch.set_timesteps(N)
    labels = torch.tensor([2])

    def eps(x, t):
        with torch.no_grad():
            return dit(x, timestep=torch.as_tensor(t).reshape(1), class_labels=labels).sample[:, :4]

    lat = fdpm_sample(eps, x_T, sch.grid_alphas, sch.grid_vp_sigmas, timesteps=list(sch.grid_timesteps))
    with torch.no_grad():
        img = (vae.decode(lat / vae.config.scaling_factor).sample / 2 + 0.5).clamp(0, 1)
    assert torch.allclose(out, img, atol=1e-5)


def test_sd_style_cfg_loop_matches_the_direct_loop():
    """The Stable-Diffusion loop pattern: scale_model_input on cat([latents] * 2), step with the CFG-combined
    prediction and the un-doubled latents. With guidance 1 the result equals the direct F-DPMSolver loop."""
    g = GaussianMixture([0.5, 0.5], [[1.0, 0.0], [-1.0, 0.5]], variances=[0.2, 0.3])
    sch = FDPMSolverScheduler()
    N = 7
    sch.set_timesteps(N)
    x_T = torch.randn(3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    latents = x_T
    for i, t in enumerate(sch.timesteps):
        lmi = sch.scale_model_input(torch.cat([latents] * 2), t)
        j = i + 1
        eps = g.predict_vp(lmi, sch.grid_alphas[j] ** 2)
        uncond, cond = eps.chunk(2)
        latents = sch.step(uncond + 1.0 * (cond - uncond), t, latents, return_dict=False)[0]
    direct = fdpm_sample(lambda x, k: g.predict_vp(x, sch.grid_alphas[k] ** 2), x_T, sch.grid_alphas, sch.grid_vp_sigmas)
    assert latents.shape == (3, 2)
    assert torch.allclose(latents, direct, atol=1e-12)


@pytest.mark.parametrize("pipeline_cls", [DDIMPipeline, DDPMPipeline])
def test_pipelines_without_scale_model_input(pipeline_cls):
    """DDIM/DDPM pipelines never call scale_model_input: first_eps='approx' refuses with a clear message,
    first_eps='evaluate' runs with N + 1 calls (t_0 ... t_N) and equals the direct loop."""
    unet = tiny_unet()
    counter = Counter(unet)
    pipe = pipeline_cls(unet=unet, scheduler=DDIMScheduler())
    pipe.set_progress_bar_config(disable=True)
    pipe.scheduler = FDPMSolverScheduler.from_config(pipe.scheduler.config)
    with pytest.raises(ValueError, match="first_eps='evaluate'"):
        pipe(batch_size=1, num_inference_steps=4, generator=torch.Generator().manual_seed(0), output_type="np")
    counter.calls.clear()
    pipe.scheduler = FDPMSolverScheduler.from_config(pipe.scheduler.config, first_eps="evaluate")
    N = 4
    out = pipe(batch_size=2, num_inference_steps=N, generator=torch.Generator().manual_seed(0), output_type="np").images
    assert len(counter.calls) == N + 1
    grid = pipe.scheduler.grid_timesteps
    assert [int(t) for t, _ in counter.calls] == [int(t) for t in grid]
    x_T = torch.randn((2, 3, 8, 8), generator=torch.Generator().manual_seed(0))

    def eps(x, t):
        with torch.no_grad():
            return unet(x, t).sample

    x = fdpm_sample(eps, x_T, pipe.scheduler.grid_alphas, pipe.scheduler.grid_vp_sigmas, timesteps=list(grid), first_eps="evaluate")
    expected = (x / 2 + 0.5).clamp(0, 1).permute(0, 2, 3, 1).numpy()
    assert abs(out - expected).max() < 1e-5


def test_analytic_model_drives_a_ddim_pipeline():
    """The exact mixture as a ModelMixin inside DDIMPipeline (image-shaped, d = 1*2*2): the pipeline's images are
    the F-DPMSolver samples of the run_scheduler loop, and they have the mixture's log-likelihood scale."""
    means = [[1.0, 0.5, -0.5, 0.0], [-1.0, -0.5, 0.5, 0.2]]
    model = AnalyticDiffusionModel(weights=[0.5, 0.5], means=means, variances=[0.05, 0.05], in_channels=1, sample_size=2)
    pipe = DDIMPipeline(unet=model, scheduler=DDIMScheduler())
    pipe.set_progress_bar_config(disable=True)
    pipe.scheduler = FDPMSolverScheduler.from_config(pipe.scheduler.config, first_eps="evaluate")
    out = pipe(batch_size=4, num_inference_steps=10, generator=torch.Generator().manual_seed(0), output_type="np").images
    x_T = torch.randn((4, 1, 2, 2), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    direct = run_scheduler(FDPMSolverScheduler(first_eps="evaluate"), model, x_T, 10)
    assert abs(out - (direct / 2 + 0.5).clamp(0, 1).permute(0, 2, 3, 1).numpy()).max() < 1e-9
    # the samples sit near a mode: distance to the nearest mean is O(sqrt(4 * 0.05))
    flat = direct.reshape(4, -1)
    dist = torch.cdist(flat, torch.tensor(means, dtype=torch.float64)).min(1).values
    assert (dist < 1.5).all(), dist


def test_dpm_solver_config_swaps_in_and_karras_grid_follows_the_config():
    src = DPMSolverMultistepScheduler(use_karras_sigmas=True)
    sch = FDPMSolverScheduler.from_config(src.config, sigma_min=0.002, sigma_max=80.0)
    sch.set_timesteps(10)
    sig = sch.grid_sigmas
    assert math.isclose(float(sig[0]), 80.0, rel_tol=1e-12) and math.isclose(float(sig[-1]), 0.002, rel_tol=1e-12)
    assert sch.timesteps.dtype == torch.float32 and len(sch.timesteps) == 10


# ----------------------------------------------------------------------------- scheduler API edges


def test_scheduler_refuses_bad_use():
    with pytest.raises(ValueError):
        FDPMSolverScheduler(solver_order=0)
    with pytest.raises(NotImplementedError):
        FDPMSolverScheduler(prediction_type="flow_prediction")
    sch = FDPMSolverScheduler(num_train_timesteps=10)
    with pytest.raises(ValueError, match="larger than num_train_timesteps"):
        sch.set_timesteps(20)
    with pytest.raises(ValueError, match="set_timesteps"):
        FDPMSolverScheduler().step(torch.zeros(1, 2), 0, torch.zeros(1, 2))
    sch = FDPMSolverScheduler(first_eps="evaluate")
    sch.set_timesteps(3)
    with pytest.raises(ValueError, match="eta"):
        sch.step(torch.zeros(1, 2), sch.timesteps[0], torch.zeros(1, 2), eta=0.5)
    with pytest.raises(ValueError, match="above zero"):
        FDPMSolverScheduler().set_timesteps(sigmas=[10.0, 1.0, 0.0])


def test_custom_sigmas_and_dtype_preserved():
    g = GaussianMixture([1.0], [[0.0, 1.0]], variances=[0.5])
    sch = FDPMSolverScheduler()
    sigmas = [80.0, 10.0, 1.0, 0.1, 0.01]
    sch.set_timesteps(sigmas=sigmas)
    assert torch.allclose(sch.grid_sigmas, torch.tensor(sigmas, dtype=torch.float64), rtol=1e-12)
    model = inv.CountingModel(g, sch)
    x = inv.pipeline_loop(sch, model, torch.randn(3, 2, dtype=torch.float32), 4, sigmas=sigmas)
    assert x.dtype == torch.float32 and len(model.calls) == 4


def test_leading_spacing_uses_the_ddim_grid():
    sch = FDPMSolverScheduler(timestep_spacing="leading", steps_offset=1)
    sch.set_timesteps(10)
    assert [int(t) for t in sch.grid_timesteps] == [999, 901, 801, 701, 601, 501, 401, 301, 201, 101, 1]


# ----------------------------------------------------------------------------- negative controls


def test_radial_errors_nearly_cancel_in_the_half_sum():
    """The signed radial errors of DDIM (-) and F-DDIM (+) have nearly equal magnitude (note: -0.0404 / +0.0308 at
    NFE 40 for N((1, .5), .25 I)), so their half-sum's radial bias is far smaller than either."""
    g = GaussianMixture([1.0], [[1.0, 0.5]], variances=[0.25])
    r = inv._errors(g, 40, inv._xT(256, 2, 0))
    m = g.means[0] * inv._karras(40).grid_alphas[-1]
    rad = lambda x: float(((x - m).norm(dim=1) - (r["ref"] - m).norm(dim=1)).mean())  # noqa: E731
    d, f, avg = rad(r["ddim_x"]), rad(r["fddim_x"]), rad(0.5 * (r["ddim_x"] + r["fddim_x"]))
    assert d < 0 < f
    assert 0.5 < -d / f < 2.0
    assert abs(avg) < 0.3 * min(-d, f)


def test_point_mass_check_detects_a_wrong_update():
    """Negative control for point-mass-exact: the same update with a wrong x0 coefficient misses the exact map
    by far more than the invariant's 1e-10, so the check is not vacuous."""
    g = GaussianMixture([1.0], [[1.0, -1.0]], variances=[0.0])
    sch = inv._karras(8)
    a, s = sch.grid_alphas, sch.grid_vp_sigmas
    x_T = inv._xT(4, 2, 0)
    x = x_T
    for k in range(8):
        x0 = g.denoise(x / a[k], s[k] / a[k])
        x = (s[k + 1] / s[k]) * x + (a[k + 1] - a[k]) * x0  # wrong x0 coefficient (exact: a_{k+1} - a_k s_{k+1}/s_k)
    assert (x - inv._exact_vp(g, x_T, sch)).abs().max() > 1e-3


def test_half_sum_is_not_second_order_for_ddim_alone():
    """Negative control for half-sum-second-order: DDIM alone has ratio ~0.5 > 0.35."""
    g = GaussianMixture([1.0], [[0.0, 0.0]], variances=[0.5])
    x_T = inv._xT(64, 2, 3)
    e = [float(inv._errors(g, N, x_T)["ddim"].norm(dim=1).mean()) for N in (40, 80)]
    assert e[1] / e[0] > 0.45


def test_diffusers_ddim_trailing_is_off_grid_when_n_does_not_divide_t():
    """A measured property of the baseline: diffusers' DDIM (trailing) steps to t - T//N, which is not the next
    timestep when N does not divide T, so even point-mass data is not solved exactly at N = 7 (but is at N = 5)."""
    m = analytic_model(weights=[1.0], means=[[1.0, 0.5]], variances=[0.0])
    from zoo.common.scheduler_report import exact_endpoint

    errs = {}
    for N in (5, 7):
        p = DDIMSampler({"denoiser": m}, DDIMSampler.Params(num_inference_steps=N))
        x = p.draw_noise(8, 0)
        errs[N] = float((p(noise=x).samples - exact_endpoint(p, x)).abs().max())
    assert errs[5] < 5e-5 < 1e-4 < errs[7]


# ----------------------------------------------------------------------------- procedures and CLI


def test_fddim_beats_diffusers_ddim_on_the_toy_at_equal_nfe():
    """The paper's claim on the exact toy (gmm3, same x_T): F-DDIM's median path error is below diffusers' DDIM
    at NFE 5, 6, 10 (the benchmark covers the full NFE sweep)."""
    from zoo.common.scheduler_report import evaluate

    m = analytic_model("gmm3")
    for N in (5, 6, 10):
        f = FDPMSolverSampler({"denoiser": m}, FDPMSolverSampler.Params(num_inference_steps=N))
        d = DDIMSampler({"denoiser": m}, DDIMSampler.Params(num_inference_steps=N))
        x = f.draw_noise(64, 0)
        assert evaluate(f, x)["path_err_median"] < evaluate(d, x)["path_err_median"], N


def test_cli_writes_a_png(tmp_path):
    m = analytic_model("gmm3")
    proc = FDPMSolverSampler({"denoiser": m}, FDPMSolverSampler.Params())
    out = tmp_path / "samples.png"
    text = proc.run_cli(proc.CliInputs(nfe=6, n=200, out=str(out)), seed=0)
    assert out.is_file() and out.stat().st_size > 1000
    assert "NFE=6" in text and "path error" in text


def test_evaluate_mode_spends_one_extra_call_in_the_cli():
    m = analytic_model("gaussian")
    proc = FDPMSolverSampler({"denoiser": m}, FDPMSolverSampler.Params(first_eps="evaluate"))
    before = len(m.call_log)
    proc.run_cli(proc.CliInputs(nfe=5, n=10), seed=0)
    # evaluate(): one sampling run (5 calls: 4 steps + the extra e_0 evaluation)
    assert len(m.call_log) - before == 5


# ----------------------------------------------------------------------------- the learned digits UNet


def test_digits_unet_loads_strictly_and_samples_look_like_digits(tmp_path):
    """The shipped digits UNet (spec variant `digits`) loads with strict=True, and F-DDIM at NFE 10 in the pipeline loop
    produces images whose nearest training digit is much closer than for random images of the same range (negative
    control) - the learned model and the sampler work together."""
    from pathlib import Path

    from safetensors.torch import load_file

    from zoo.common.digits import build_digits_unet
    from zoo.common.digits import digits_images as digits_data

    root = Path(__file__).resolve().parents[2]
    unet = build_digits_unet()
    unet.load_state_dict(load_file(str(root / "specs/weights/f-dpmsolver-digits-unet.safetensors")), strict=True)
    proc = FDPMSolverSampler({"denoiser": unet.eval()}, FDPMSolverSampler.Params(num_inference_steps=10))
    samples = proc(seed=0, batch_size=16).samples.clamp(-1, 1).reshape(16, -1)
    data = digits_data().reshape(-1, 64)
    noise = torch.rand(16, 64, generator=torch.Generator().manual_seed(0)) * 2 - 1
    nn_s = torch.cdist(samples, data).min(1).values.median()
    nn_r = torch.cdist(noise, data).min(1).values.median()
    assert nn_s < 0.5 * nn_r, (float(nn_s), float(nn_r))
    text = proc.run_cli(proc.CliInputs(nfe=4, n=8, out=str(tmp_path / "digits.png")), seed=0)
    assert (tmp_path / "digits.png").stat().st_size > 1000 and "4 NFE" in text
