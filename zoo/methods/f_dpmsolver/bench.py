"""Comparison machinery shared by the benchmark (:mod:`.benchmark`, ``zoo bench f-dpmsolver``) and the slow metric checks: the samplers of
both grids (VP diffusers-native, EDM Karras), the EDM-preconditioned analytic model and an exact-ODE cache.
See the benchmark's docstring for the protocol."""
from __future__ import annotations

import math

import torch

from zoo.common.gmm import analytic_model, sliced_wasserstein2
from zoo.common.scheduler_loop import run_scheduler
from zoo.common.scheduler_samplers import DDIMSampler, DPMSolverPPSampler, UniPCSampler, vp_config

from .sampler import FDPMSolverSampler

EDM = dict(sigma_min=0.002, sigma_max=80.0, rho=7.0)


class EDMAnalytic(torch.nn.Module):
    """The exact mixture behind diffusers' EDM schedulers: input c_in * x, time c_noise = log(sigma) / 4, output F
    with D = c_skip x + c_out F (inverted through the scheduler's own precondition_outputs)."""

    def __init__(self, gmm, scheduler):
        super().__init__()
        self.gmm, self.sch = gmm, scheduler

    def forward(self, x_in, t):
        sigma = float(torch.exp(4 * torch.as_tensor(t, dtype=torch.float64)))
        x = x_in * math.sqrt(sigma**2 + self.sch.config.sigma_data**2)
        d = self.gmm.denoise(x, sigma)
        skip = self.sch.precondition_outputs(x, torch.zeros_like(x), sigma)
        c_out = self.sch.precondition_outputs(torch.zeros_like(x), torch.ones_like(x), sigma)
        return type("Out", (), {"sample": (d - skip) / c_out})()


class EDMRun:
    """A diffusers EDM scheduler run in VP coordinates in, VP coordinates out (x_edm = x_vp * sqrt(1 + sigma^2))."""

    def __init__(self, cls, gmm, N):
        self.sch = cls(**EDM, sigma_data=0.5, final_sigmas_type="zero") if "DPMSolver" in cls.__name__ else cls(**EDM, sigma_data=0.5)
        self.gmm, self.N = gmm, N

    def noise_range(self):
        self.sch.set_timesteps(self.N)
        sig = self.sch.sigmas.double()
        return float(sig[0]), float(sig[-1])

    def __call__(self, x_T):
        s0, s1 = self.noise_range()
        # run_scheduler multiplies by init_noise_sigma = sqrt(s0^2 + 1): x_T in EDM coordinates at sigma_max
        x = run_scheduler(self.sch, EDMAnalytic(self.gmm, self.sch), x_T.double(), self.N)
        return x.double() / math.sqrt(1 + s1**2)


#: table / plot order of the samplers (a sampler that cannot spend exactly N calls is left out at that NFE)
NAMES = ["F-DDIM", "F-DDIM-mean", "F-DDIM-evaluate", "(DDIM+F-DDIM)/2", "F-DPMSolver-2", "DDIM", "EDMEuler", "DPM-Solver++(2M)", "UniPC"]


def bench_model(mixture: str):
    """The analytic model of a benchmark mixture: the named toys of ``zoo.common.gmm`` plus ``gaussian-centred``
    (the ``gaussian`` law moved to mean 0: the case where F-DDIM's first guess e_0 := x_T is right)."""
    if mixture == "gaussian-centred":
        return analytic_model(weights=[1.0], means=[[0.0, 0.0]], variances=[0.25])
    return analytic_model(mixture)


def fdpm_variants(model, N: int, grid_kw: dict, data_mean=None) -> list:
    """(name, procedure) of the F-DPMSolver rows at exactly N model calls: F-DDIM, F-DDIM-mean, F-DDIM-evaluate
    (N - 1 steps), the half-sum (N / 2 steps of each; even N only) and the order-2 look-ahead."""
    from .sampler import FDPMHalfSumSampler

    P = FDPMSolverSampler.Params
    out = [("F-DDIM", FDPMSolverSampler({"denoiser": model}, P(num_inference_steps=N, **grid_kw)))]
    out.append(("F-DDIM-mean", FDPMSolverSampler({"denoiser": model}, P(num_inference_steps=N, first_eps="mean", data_mean=data_mean, **grid_kw))))
    if N >= 2:
        out.append(("F-DDIM-evaluate", FDPMSolverSampler({"denoiser": model}, P(num_inference_steps=N - 1, first_eps="evaluate", **grid_kw))))
    if N % 2 == 0:
        out.append(("(DDIM+F-DDIM)/2", FDPMHalfSumSampler({"denoiser": model}, P(num_inference_steps=N // 2, **grid_kw))))
    out.append(("F-DPMSolver-2", FDPMSolverSampler({"denoiser": model}, P(num_inference_steps=N, solver_order=2, **grid_kw))))
    return out


class GridDDIM:
    """DDIM on F-DDIM's own grid (N + 1 points, N calls at t_0 ... t_{N-1}, ending at sigma(t_N)): the authors' DDIM
    baseline protocol (same grid for every sampler in their ``sampler.py``)."""

    def __init__(self, model, N: int, grid_kw: dict):
        self.proc = FDPMSolverSampler({"denoiser": model}, FDPMSolverSampler.Params(num_inference_steps=N, **grid_kw))
        self.model, self.N = model, N

    def noise_range(self):
        return self.proc.noise_range()

    def __call__(self, x_T):
        from .sampler import grid_ddim

        self.proc.scheduler.set_timesteps(self.N)
        return grid_ddim(self.model, self.proc.scheduler, x_T.to(self.proc._dtype))


def samplers(grid: str, model, N: int):
    """(name, callable x_T -> x_N, noise_range) of every sampler on a grid at exactly N model calls.

    On the EDM grid "DDIM" is DDIM on F-DDIM's own N + 1 Karras points (as in the authors' comparison); diffusers'
    ``EDMEulerScheduler`` (the same update, but an N-point Karras grid plus a final step to sigma = 0, i.e. one step
    fewer inside [0.002, 80]) is the separate "EDMEuler" column."""
    out = []
    grid_kw = {} if grid == "vp" else {"use_karras_sigmas": True, **EDM}
    for name, p in fdpm_variants(model, N, grid_kw):
        out.append((name, lambda x, p=p: p(noise=x).samples, p.noise_range))
    if grid == "vp":
        for name, cls, kw in [
            ("DDIM", DDIMSampler, {}),
            ("DPM-Solver++(2M)", DPMSolverPPSampler, {}),
            ("UniPC", UniPCSampler, {}),
        ]:
            p = cls({"denoiser": model}, cls.Params(num_inference_steps=N, **kw))
            out.append((name, lambda x, p=p: p(noise=x).samples, p.noise_range))
    else:
        from diffusers import EDMDPMSolverMultistepScheduler, EDMEulerScheduler

        r = GridDDIM(model, N, grid_kw)
        out.append(("DDIM", r, r.noise_range))
        for name, cls in [("EDMEuler", EDMEulerScheduler), ("DPM-Solver++(2M)", EDMDPMSolverMultistepScheduler)]:
            r = EDMRun(cls, model.gmm, N)
            out.append((name, r, r.noise_range))
    return out


class ExactCache:
    def __init__(self, gmm, x_T):
        self.gmm, self.x_T, self.cache = gmm, x_T, {}

    def __call__(self, s0: float, s1: float) -> torch.Tensor:
        key = (round(s0, 6), round(s1, 9))
        if key not in self.cache:
            x = self.x_T.double() * math.sqrt(1 + s0**2)
            self.cache[key] = self.gmm.exact_ode(x, s0, s1) / math.sqrt(1 + s1**2)
        return self.cache[key]




def compare(grid: str, mixture: str, nfe: int, rows: int = 1000, seed: int = 0) -> dict[str, dict[str, float]]:
    """Every sampler of ``grid`` on ``mixture`` at ``nfe`` from the same ``rows`` x_T (seed): path error (median),
    SW2 to exact data samples (seed + 1) and mean exact log-density."""
    model = bench_model(mixture)
    x_T = torch.randn(rows, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    exact = ExactCache(model.gmm, x_T)
    data = model.gmm.sample(rows, generator=torch.Generator().manual_seed(seed + 1))
    out = {}
    for name, run, noise_range in samplers(grid, model, nfe):
        x = run(x_T).double()
        out[name] = {
            "path_err": float((x - exact(*noise_range())).norm(dim=1).median()),
            "sw2": sliced_wasserstein2(x, data, generator=torch.Generator().manual_seed(7)),
            "loglik": float(model.gmm.log_prob(x).mean()),
        }
    return out


# ----------------------------------------------------------------------------- the learned digits UNet


def learned_reference(model, x_T: torch.Tensor, t_start: float = 999.0, t_end: float = 0.0, rtol: float = 1e-6, atol: float = 1e-6) -> torch.Tensor:
    """High-accuracy PF-ODE solution of a learned VP epsilon-model from training time ``t_start`` to ``t_end``.

    Integrates ``dx/du = sigma * eps(x / sqrt(1 + sigma^2), t(sigma))`` in EDM coordinates, ``u = log sigma``
    (adaptive Dormand-Prince 5(4), float64 state, the model in its own dtype). Fractional training times
    interpolate log-sigma linearly between table entries (the convention of the schedulers), so at integer
    timesteps the model sees exactly what every sampler feeds it. Returns VP coordinates at ``t_end``.
    """
    from zoo.common.gmm import VPSchedule, _dopri5

    from .scheduler import FDPMSolverScheduler


    sch = FDPMSolverScheduler(**{k: v for k, v in vp_config(model).items() if k != "prediction_type"})
    table = VPSchedule(sch.alphas_cumprod)
    ab0, ab1 = float(table.alpha_bar(t_start)), float(table.alpha_bar(t_end))
    s0, s1 = math.sqrt((1 - ab0) / ab0), math.sqrt((1 - ab1) / ab1)
    shape = x_T.shape
    mdtype = next(model.parameters()).dtype

    def f(u, y):
        sigma = math.exp(u)
        t = float(sch._sigma_to_t(sigma)[0])
        x_vp = (y / math.sqrt(1 + sigma**2)).reshape(shape).to(mdtype)
        with torch.no_grad():
            eps = model(x_vp, torch.full((shape[0],), t, dtype=torch.float32)).sample
        return sigma * eps.double().reshape(shape[0], -1)

    y0 = x_T.double().reshape(shape[0], -1) * math.sqrt(1 + s0**2)
    y = _dopri5(f, math.log(s0), math.log(s1), y0, rtol, atol)
    return (y / math.sqrt(1 + s1**2)).reshape(shape)


def digits_samplers(model, N: int, data_mean: float | None = None):
    """Samplers at exactly N model calls, all ending at the same noise level sigma(t = 0) (no step to sigma = 0, where
    the discrete model has no time): the F-DPMSolver rows of :func:`fdpm_variants` (LDM grid; F-DDIM-mean with the
    training data's mean pixel value), DDIM (set_alpha_to_one=False), DPM-Solver++(2M) and UniPC with
    final_sigmas_type="sigma_min"."""
    if data_mean is None:
        from zoo.common.digits import digits_images as digits_data

        data_mean = float(digits_data().mean())
    out = fdpm_variants(model, N, {}, data_mean=data_mean)
    for name, cls, kw in [
        ("DDIM", DDIMSampler, {"set_alpha_to_one": False}),
        ("DPM-Solver++(2M)", DPMSolverPPSampler, {"final_sigmas_type": "sigma_min"}),
        ("UniPC", UniPCSampler, {"final_sigmas_type": "sigma_min"}),
    ]:
        p = cls({"denoiser": model}, cls.Params(num_inference_steps=N, **kw))
        out.append((name, p))
    return out


def digits_compare(model, nfes, rows: int = 64, seed: int = 0) -> dict[int, dict[str, float]]:
    """Median path error (L2 over the 64 pixels) of every digits sampler against :func:`learned_reference`."""
    x_T = torch.randn(rows, 1, 8, 8, generator=torch.Generator().manual_seed(seed))
    ref = learned_reference(model, x_T).reshape(rows, -1)
    ab0 = float(FDPMSolverSampler({"denoiser": model}, FDPMSolverSampler.Params()).scheduler.alphas_cumprod[0])
    sigma_end = math.sqrt((1 - ab0) / ab0)
    res: dict[int, dict[str, float]] = {}
    from zoo.common.digits import digits_images as digits_data

    mean = float(digits_data().mean())
    for N in nfes:
        res[N] = {}
        for name, p in digits_samplers(model, N, mean):
            _, s1 = p.noise_range()
            assert abs(s1 / sigma_end - 1) < 1e-4, (name, s1, sigma_end)  # every sampler ends at sigma(t = 0)
            out = p(noise=x_T).samples.double().reshape(rows, -1)
            res[N][name] = float((out - ref).norm(dim=1).median())
    return res


# ----------------------------------------------------------------------------- pipeline protocols (issue #12 items 1-2)


def _end_sigma(sch, ts) -> float:
    """EDM noise level at which a scheduler's run over ``ts`` ends (F-DPMSolver: its last grid level; DDIM: the level
    after its last timestep, 0 with set_alpha_to_one)."""
    if hasattr(sch, "grid_sigmas"):
        return float(sch.grid_sigmas[-1])
    prev = int(ts[-1]) - sch.config.num_train_timesteps // sch.num_inference_steps
    ab = float(sch.alphas_cumprod[prev]) if prev >= 0 else float(sch.final_alpha_cumprod)
    return math.sqrt((1 - ab) / ab) if ab < 1 else 0.0


def _sigma_at(sch, t) -> float:
    ab = float(sch.alphas_cumprod.double()[int(t)])
    return math.sqrt((1 - ab) / ab)


def img2img_error(scheduler, model, N: int = 10, strength: float = 0.5, rows: int = 256, seed: int = 0, set_begin: bool = True) -> float:
    """The StableDiffusionImg2Img protocol on the exact testbed: data ``x0`` (seed) noised with ``add_noise`` to
    ``timesteps[t_start]`` (``t_start = N - int(N * strength)``), then the remaining timesteps in the pipeline loop
    (with ``set_begin_index`` when ``set_begin``, else only slicing ``timesteps`` as diffusers' DDIM test does).
    Returns the median distance to the exact PF-ODE image of the noised input over the scheduler's own range."""
    gmm = model.gmm
    x0 = gmm.sample(rows, generator=torch.Generator().manual_seed(seed))
    noise = torch.randn(rows, gmm.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(seed + 1))
    sch = scheduler
    sch.set_timesteps(N)
    t_start = N - int(N * strength)
    ts = sch.timesteps[t_start:]
    if set_begin and hasattr(sch, "set_begin_index"):
        sch.set_begin_index(t_start)
    lat = sch.add_noise(x0, noise, ts[:1])
    for t in ts:
        lat = sch.step(model(sch.scale_model_input(lat, t), t).sample, t, lat).prev_sample
    s0, s1 = _sigma_at(sch, ts[0]), _end_sigma(sch, ts)
    ref = gmm.exact_ode(x0 + s0 * noise, s0, s1) / math.sqrt(1 + s1**2)
    return float((lat.double() - ref).norm(dim=1).median())


def inpaint_scores(scheduler, model, N: int = 10, rows: int = 512, seed: int = 0, blend_every_step: bool = True) -> dict[str, float]:
    """The StableDiffusionInpaint (4-channel UNet) protocol on the exact 2-D testbed: coordinate 0 is known (taken from
    data samples), coordinate 1 is inpainted. After each step the known coordinate is replaced by the data noised to the
    next timestep (``add_noise``), after the last step by the clean value. ``blend_every_step=False`` blends only at the
    end (what a scheduler that ignores edits effectively did). Scores: max error of the known coordinate and the mean
    exact conditional log-density ``log p(x_1 | x_0)`` of the inpainted one."""
    gmm = model.gmm
    data = gmm.sample(rows, generator=torch.Generator().manual_seed(seed))
    noise = torch.randn(rows, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(seed + 1))
    known = torch.tensor([1.0, 0.0], dtype=torch.float64)  # mask of the known coordinate
    sch = scheduler
    sch.set_timesteps(N)
    ts = sch.timesteps
    lat = torch.randn(rows, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(seed + 2)) * sch.init_noise_sigma
    for i, t in enumerate(ts):
        lat = sch.step(model(sch.scale_model_input(lat, t), t).sample, t, lat).prev_sample
        if i < len(ts) - 1:
            if blend_every_step:
                lat = known * sch.add_noise(data, noise, ts[i + 1 : i + 2]) + (1 - known) * lat
        else:
            lat = known * data + (1 - known) * lat
    # exact conditional law of x_1 given x_0 = data[:, 0]: a 1-D mixture per row
    w = gmm.log_weights.exp()
    mu, var = gmm.means, gmm.evals  # isotropic per component: variances on the eigen-diagonal
    logw = torch.log(w)[None] - 0.5 * ((data[:, :1] - mu[None, :, 0]) ** 2 / var[None, :, 0] + torch.log(2 * math.pi * var[None, :, 0]))
    post = torch.softmax(logw, dim=1)
    x1 = lat[:, 1:2].double()
    comp = -0.5 * ((x1 - mu[None, :, 1]) ** 2 / var[None, :, 1] + torch.log(2 * math.pi * var[None, :, 1]))
    cond = torch.logsumexp(torch.log(post) + comp, dim=1)
    return {"known_err": float((lat[:, 0] - data[:, 0]).abs().max()), "cond_loglik": float(cond.mean())}


# ----------------------------------------------------------------------------- why F-DDIM loses at NFE 4-6 on digits


def digits_mixture_model(variance: float = 0.01):
    """The exact epsilon-model of the digits training data (issue 40 item 5): an equal-weight mixture of isotropic
    Gaussians N(x_i, variance I), one per image of :func:`zoo.common.digits.digits_images` (the 1,797 images the
    digits UNet was trained on), under the UNet's own VP schedule (linear betas, T = 1000). Its denoiser is exact,
    so any loss of a sampler on it is the sampler's, not model error. The default ``variance`` 0.01 (sd 0.1) is about
    one grey level of the data (17 levels 0.125 apart in [-1, 1]); ``variance -> 0`` is the empirical law itself, for
    which DDIM becomes exact once the posterior sits on one image. float64, a diffusers ``ModelMixin``
    (``sample_size`` 8, ``in_channels`` 1) that every sampler of :func:`digits_samplers` accepts."""
    from diffusers import ModelMixin
    from diffusers.configuration_utils import ConfigMixin, register_to_config
    from diffusers.utils import BaseOutput

    from zoo.common.digits import digits_images
    from zoo.common.gmm import VPSchedule

    class Out(BaseOutput):
        sample: torch.Tensor

    class DigitsMixture(ModelMixin, ConfigMixin):
        @register_to_config
        def __init__(self, variance: float = 0.01, num_train_timesteps: int = 1000, beta_start: float = 1e-4,
                     beta_end: float = 0.02, beta_schedule: str = "linear", in_channels: int = 1, sample_size: int = 8):
            super().__init__()
            self.register_buffer("means", digits_images().double().reshape(-1, in_channels * sample_size**2))
            self.register_buffer("alphas_cumprod", VPSchedule.from_betas(num_train_timesteps, beta_start, beta_end, beta_schedule).alphas_cumprod)
            self._anchor = torch.nn.Parameter(torch.zeros((), dtype=torch.float64), requires_grad=False)

        def denoise(self, x: torch.Tensor, sigma2: torch.Tensor) -> torch.Tensor:
            """E[x0 | x0 + sigma n = x] (EDM coordinates): posterior-weighted shrinkage towards each image."""
            c = self.config.variance + sigma2[:, None]  # (B, 1)
            d2 = torch.cdist(x, self.means, compute_mode="donot_use_mm_for_euclid_dist") ** 2  # (B, K), exact differences
            w = torch.softmax(-0.5 * d2 / c, dim=1)
            shrink = self.config.variance / c
            return shrink * x + (1 - shrink) * (w @ self.means)

        def forward(self, sample: torch.Tensor, timestep, **_):
            t = torch.as_tensor(timestep, dtype=torch.float64).reshape(-1).expand(sample.shape[0])
            ab = VPSchedule(self.alphas_cumprod).alpha_bar(t)[:, None]
            xv = sample.double().reshape(sample.shape[0], -1)
            x = xv / ab.sqrt()
            eps = (xv - ab.sqrt() * self.denoise(x, ((1 - ab) / ab)[:, 0])) / (1 - ab).sqrt()
            return Out(sample=eps.reshape(sample.shape).to(sample.dtype))

    return DigitsMixture(variance=variance).eval()


def fddim_clipped(model, x_T: torch.Tensor, N: int, clip: str | None, bound: float = 1.0) -> torch.Tensor:
    """F-DDIM (order 1, e_0 := x_T, the LDM grid of :class:`FDPMSolverScheduler`) with the denoised estimate clipped to
    ``[-bound, bound]`` (the data range) at one place - a diagnostic, not the paper's method:

    * ``clip="lookahead"``: the implicit x0_k = (x_k - sigma_k e_k) / alpha_k from which the look-ahead is built,
      xhat_{k+1} = alpha_{k+1} clip(x0_k) + sigma_{k+1} e_k (the order-1 look-ahead of step 1 written in x0 form;
      diffusers' DDIM ``clip_sample`` clips the same quantity in DDIM's update);
    * ``clip="update"``: the x0hat of step 3 (the forward value at the look-ahead point);
    * ``None``: plain F-DDIM (equals :class:`FDPMSolverSampler` up to float rounding; tested).
    """

    from .scheduler import FDPMSolverScheduler, forward_value_update

    if clip not in (None, "lookahead", "update"):
        raise ValueError(f"clip must be None, 'lookahead' or 'update', got {clip!r}")
    sch = FDPMSolverScheduler(**vp_config(model))
    sch.set_timesteps(N)
    a, s, lam, ts = sch.grid_alphas, sch.grid_vp_sigmas, sch.grid_lambdas, sch.grid_timesteps
    mdt = next(model.parameters()).dtype
    x = x_T.double()
    e = x
    for k in range(N):
        x0k = (x - s[k] * e) / a[k]
        if clip == "lookahead":
            x0k = x0k.clamp(-bound, bound)
        xhat = a[k + 1] * x0k + s[k + 1] * e
        with torch.no_grad():
            e = model(xhat.to(mdt), ts[k + 1]).sample.double()
        x0 = (xhat - s[k + 1] * e) / a[k + 1]
        if clip == "update":
            x0 = x0.clamp(-bound, bound)
        x = forward_value_update(x, x0, s[k], s[k + 1], a[k + 1], lam[k + 1] - lam[k])
    return x


def digits_diagnosis(models: dict, nfes, rows: int = 64, seed: int = 0) -> dict[str, dict[int, dict[str, float]]]:
    """Median path error to each model's own high-accuracy PF-ODE solution (:func:`learned_reference`, the protocol
    of :func:`digits_compare`, same x_T) of F-DDIM, F-DDIM with the look-ahead x0 clipped, F-DDIM with the update x0
    clipped, DDIM and DDIM with ``clip_sample=True`` (all N calls, all ending at sigma(t = 0)), for each named model
    (the digits UNet; :func:`digits_mixture_model`, the exact denoiser of its training data)."""
    from diffusers import DDIMScheduler


    x_T = torch.randn(rows, 1, 8, 8, generator=torch.Generator().manual_seed(seed))
    out: dict[str, dict[int, dict[str, float]]] = {}
    for name, model in models.items():
        ref = learned_reference(model, x_T).reshape(rows, -1)
        mdt = next(model.parameters()).dtype
        out[name] = {}
        for N in nfes:
            res = {}
            for label, clip in (("F-DDIM", None), ("F-DDIM clip look-ahead x0", "lookahead"), ("F-DDIM clip update x0", "update")):
                res[label] = fddim_clipped(model, x_T, N, clip).reshape(rows, -1)
            for label, cs in (("DDIM", False), ("DDIM clip_sample", True)):
                sch = DDIMScheduler(**vp_config(model), timestep_spacing="trailing", set_alpha_to_one=False, clip_sample=cs)
                with torch.no_grad():
                    res[label] = run_scheduler(sch, model, x_T.to(mdt), N).double().reshape(rows, -1)
            out[name][N] = {k: float((v - ref).norm(dim=1).median()) for k, v in res.items()}
    return out


def edit_detection_cost(shapes=((2, 4, 64, 64), (1, 4, 128, 128)), steps: int = 50, repeats: int = 7) -> list[dict[str, float]]:
    """The per-step cost of honouring in-place edits (issue 40 item 1), no model, on the calling thread: ms per
    :meth:`FDPMSolverScheduler.step` over a ``steps``-step run (best of ``repeats``), and the two pieces the fix adds
    to each step - one ``torch.equal`` of the sample with the scheduler's private values and one copy of
    ``prev_sample`` - timed alone at the same shape (mean of 200, best of ``repeats``). On an accelerator the
    comparison is also one host synchronisation per step (not measured here).

        python -c "from zoo.methods.f_dpmsolver.bench import edit_detection_cost as c; [print(r) for r in c()]"
    """
    import time

    from .scheduler import FDPMSolverScheduler

    def best(fn) -> float:
        return min(fn() for _ in range(repeats)) * 1e3

    rows = []
    for shape in shapes:
        out = torch.randn(shape, generator=torch.Generator().manual_seed(1))
        x0 = torch.randn(shape, generator=torch.Generator().manual_seed(0))

        def run() -> float:
            sch = FDPMSolverScheduler()
            sch.set_timesteps(steps)
            x = sch.scale_model_input(x0, sch.timesteps[0])
            t0 = time.perf_counter()
            for t in sch.timesteps:
                x = sch.step(out, t, x).prev_sample
            return (time.perf_counter() - t0) / steps

        def piece(fn) -> float:
            t0 = time.perf_counter()
            for _ in range(200):
                fn()
            return (time.perf_counter() - t0) / 200

        y = x0.clone()
        rows.append({"shape": "x".join(map(str, shape)), "step_ms": best(run),
                     "equal_ms": best(lambda: piece(lambda: torch.equal(x0, y))),
                     "copy_ms": best(lambda: piece(lambda: x0.to(x0.dtype, copy=True)))})
    return rows
