"""DDIM on F-DDIM's own grid (the authors' comparison), the half-sum (DDIM + F-DDIM) / 2 as a
sampler, and the first guess of the epsilon history (``first_eps``) - on the exact Gaussian-mixture testbed."""
from __future__ import annotations

import math

import pytest
import torch

diffusers = pytest.importorskip("diffusers")

from zoo.common.gmm import analytic_model  # noqa: E402
from zoo.common.scheduler_report import evaluate, steps_for_nfe  # noqa: E402
from zoo.common.scheduler_samplers import DDIMSampler  # noqa: E402
from zoo.methods.f_dpmsolver import FDPMHalfSumSampler, FDPMSolverSampler, FDPMSolverScheduler, fdpm_sample  # noqa: E402
from zoo.methods.f_dpmsolver import invariants as inv  # noqa: E402
from zoo.methods.f_dpmsolver.bench import EDM, EDMAnalytic, GridDDIM, bench_model  # noqa: E402
from zoo.methods.f_dpmsolver.scheduler import first_eps_guess  # noqa: E402


def _x(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


# ----------------------------------------------------------------------------- item 5: same-grid DDIM


@pytest.mark.parametrize("N", [4, 6, 10])
def test_grid_ddim_is_diffusers_edm_euler_on_the_authors_grid(N):
    """The EDM-grid DDIM baseline (N + 1 Karras points, N calls, ending at 0.002) is diffusers' EDMEulerScheduler given
    the same N + 1 points (its extra final step 0.002 -> 0.002 has zero length), to float32 precision of diffusers'
    sigmas; the default EDMEulerScheduler(N) instead has only N - 1 steps inside [0.002, 80]."""
    from diffusers import EDMEulerScheduler

    m = analytic_model("gmm3")
    x_T = _x(16)
    ours = GridDDIM(m, N, {"use_karras_sigmas": True, **EDM})(x_T)
    sch = EDMEulerScheduler(**EDM, sigma_data=0.5, final_sigmas_type="sigma_min")
    sch.set_timesteps(sigmas=torch.linspace(0, 1, N + 1, dtype=torch.float64))
    model = EDMAnalytic(m.gmm, sch)
    x = x_T * sch.init_noise_sigma
    for t in sch.timesteps:
        x = sch.step(model(sch.scale_model_input(x, t), t).sample, t, x).prev_sample
    theirs = x.double() / math.sqrt(1 + float(sch.sigmas[-1]) ** 2)
    assert float((ours - theirs).abs().max()) < 1e-5
    default = EDMEulerScheduler(**EDM, sigma_data=0.5)
    default.set_timesteps(N)
    inside = int(((default.sigmas[:-1] >= 0.002 - 1e-6) & (default.sigmas[1:] >= 0.002 - 1e-6)).sum())
    assert inside == N - 1


# ----------------------------------------------------------------------------- item 6: the half-sum sampler


def test_half_sum_sampler_is_the_average_on_one_grid_and_counts_2n_calls():
    m = analytic_model("gmm3")
    N = 7
    proc = FDPMHalfSumSampler({"denoiser": m}, FDPMHalfSumSampler.Params(num_inference_steps=N))
    x_T = _x(8, 1)
    before = len(m.call_log)
    out = proc(noise=x_T).samples
    assert len(m.call_log) - before == 2 * N == proc.nfe()
    sch = proc.scheduler
    a, s = sch.grid_alphas, sch.grid_vp_sigmas
    f = inv._eps_fn(m.gmm, a)
    expected = 0.5 * (fdpm_sample(f, x_T, a, s) + inv.ddim_direct(f, x_T, a, s))
    assert torch.allclose(out, expected, atol=1e-12, rtol=0)
    assert steps_for_nfe(proc, 20) == 10
    from registry.errors import ParamError

    with pytest.raises(ParamError, match="--nfe 7: not reachable"):
        steps_for_nfe(proc, 7)


def test_half_sum_sampler_is_second_order():
    """On the closed-form Gaussian the sampler's median error falls by <= 0.35 per doubling of N (40 -> 80 -> 160),
    while F-DDIM alone falls by >= 0.4 (first order)."""
    m = analytic_model("gaussian")
    x_T = _x(64, 2)
    kw = {"use_karras_sigmas": True, **EDM}
    half, single = [], []
    for N in (40, 80, 160):
        h = FDPMHalfSumSampler({"denoiser": m}, FDPMHalfSumSampler.Params(num_inference_steps=N, **kw))
        f = FDPMSolverSampler({"denoiser": m}, FDPMSolverSampler.Params(num_inference_steps=N, **kw))
        half.append(evaluate(h, x_T)["path_err_median"])
        single.append(evaluate(f, x_T)["path_err_median"])
    assert all(b / a <= 0.35 for a, b in zip(half, half[1:])), half
    assert all(b / a >= 0.4 for a, b in zip(single, single[1:])), single


# ----------------------------------------------------------------------------- item 7: the first guess


def test_mean_first_guess_denoises_to_the_data_mean():
    """first_eps="mean": the implicit denoised guess (x_T - sigma_0 e_0) / alpha_0 is exactly mu (scalar or per
    channel); the paper's e_0 := x_T gives ~ (alpha_0 / 2) x_T, i.e. ~0."""
    sch = FDPMSolverScheduler()
    sch.set_timesteps(10)
    a0, s0 = sch.grid_alphas[0], sch.grid_vp_sigmas[0]
    x = torch.randn(3, 2, 4, 4, dtype=torch.float64)
    mu = torch.tensor([0.5, -0.25], dtype=torch.float64).reshape(1, 2, 1, 1)
    e = first_eps_guess(x, a0, s0, "mean", [0.5, -0.25])
    assert torch.allclose((x - s0 * e) / a0, mu.expand_as(x), atol=1e-9)
    e = first_eps_guess(x, a0, s0, "approx")
    assert float(((x - s0 * e) / a0).abs().max()) < 0.02 * float(x.abs().max())
    with pytest.raises(ValueError, match="channels"):
        first_eps_guess(x, a0, s0, "mean", [0.1, 0.2, 0.3])


@pytest.mark.parametrize("grid", ["vp", "edm"])
def test_nfe4_loss_comes_from_the_first_guess(grid):
    """Item 7 evidence at NFE 4 (256 fixed x_T): F-DDIM loses to DDIM on N((1, .5), .25 I) but beats it on the same law
    centred at 0, where e_0 := x_T is the right first guess; with the data-mean first guess (same 4 calls) it beats
    DDIM on the off-centre law too. DDIM runs on F-DDIM's grid (authors' protocol)."""
    kw = {} if grid == "vp" else {"use_karras_sigmas": True, **EDM}
    x_T = _x(256, 3)
    res = {}
    for mix in ("gaussian", "gaussian-centred"):
        m = bench_model(mix)
        exact = evaluate(FDPMSolverSampler({"denoiser": m}, FDPMSolverSampler.Params(num_inference_steps=4, **kw)), x_T)
        ddim = GridDDIM(m, 4, kw)
        s0, s1 = ddim.noise_range()
        ref = m.gmm.exact_ode(x_T * math.sqrt(1 + s0**2), s0, s1) / math.sqrt(1 + s1**2)
        d = float((ddim(x_T) - ref).norm(dim=1).median())
        mean = evaluate(FDPMSolverSampler({"denoiser": m}, FDPMSolverSampler.Params(num_inference_steps=4, first_eps="mean", **kw)), x_T)
        res[mix] = (d / exact["path_err_median"], d / mean["path_err_median"])
    assert res["gaussian"][0] < 1 < res["gaussian-centred"][0], res
    assert res["gaussian"][1] > 1.5, res


def test_mean_first_guess_needs_a_mean_when_the_model_has_no_data_law():
    from diffusers import UNet2DModel

    from zoo.common.digits import DIGITS_MEAN, DIGITS_UNET, build_digits_unet
    from zoo.common.digits import digits_images as digits_data

    bare = UNet2DModel(**DIGITS_UNET).eval()
    with pytest.raises(ValueError, match="data_mean"):
        FDPMSolverSampler({"denoiser": bare}, FDPMSolverSampler.Params(first_eps="mean"))
    proc = FDPMSolverSampler({"denoiser": bare}, FDPMSolverSampler.Params(first_eps="mean", data_mean=-0.6))
    assert proc.scheduler.config.data_mean == -0.6
    assert abs(float(digits_data().mean()) - DIGITS_MEAN) < 1e-7
    proc = FDPMSolverSampler({"denoiser": build_digits_unet()}, FDPMSolverSampler.Params(first_eps="mean"))
    assert proc.scheduler.config.data_mean == DIGITS_MEAN


def test_ddim_baseline_unchanged_by_the_new_rows():
    """The VP-grid DDIM column is still diffusers' DDIMScheduler (trailing), the same sampler as before."""
    m = analytic_model("gmm3")
    p = DDIMSampler({"denoiser": m}, DDIMSampler.Params(num_inference_steps=10))
    assert type(p.scheduler).__name__ == "DDIMScheduler" and p.scheduler.config.timestep_spacing == "trailing"


def test_digits_diagnosis_pieces_are_what_they_claim():
    """The two pieces behind the card's "not model error, the look-ahead x0 leaves the data range":
    ``digits_mixture_model`` is the exact epsilon of N(x_i, v I) over the training images (equal to the generic
    mixture code of zoo.common.gmm, 1e-10), and ``fddim_clipped(clip=None)`` is F-DDIM (equal to FDPMSolverSampler on
    the exact gmm3 toy, 1e-10) while clipping changes it."""
    from zoo.common.digits import digits_images
    from zoo.common.gmm import GaussianMixture, VPSchedule
    from zoo.methods.f_dpmsolver.bench import digits_mixture_model, fddim_clipped

    model = digits_mixture_model(0.01)
    x = torch.randn(3, 1, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    t = torch.tensor([50.0, 400.0, 900.0], dtype=torch.float64)
    means = digits_images().double().reshape(-1, 64)
    gmm = GaussianMixture(torch.ones(len(means)), means, variances=torch.full((len(means),), 0.01, dtype=torch.float64))
    ab = VPSchedule.from_betas().alpha_bar(t)
    want = torch.stack([gmm.predict_vp(x[i : i + 1].reshape(1, -1), ab[i : i + 1])[0] for i in range(3)])
    got = torch.stack([model(x[i : i + 1], t[i]).sample.reshape(-1) for i in range(3)])
    assert torch.allclose(got, want, atol=1e-10, rtol=0), float((got - want).abs().max())

    toy = analytic_model("gmm3")
    x_T = torch.randn(16, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    plain = FDPMSolverSampler({"denoiser": toy}, FDPMSolverSampler.Params(num_inference_steps=5))(noise=x_T).samples
    assert torch.allclose(fddim_clipped(toy, x_T, 5, None), plain, atol=1e-10, rtol=0)
    assert not torch.allclose(fddim_clipped(toy, x_T, 5, "lookahead", bound=0.5), plain, atol=1e-3)
