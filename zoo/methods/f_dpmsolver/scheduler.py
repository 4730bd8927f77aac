"""F-DPMSolver ("forward-value" first-order diffusion sampler) as a diffusers scheduler.

Paper: Jiao, Li, Cai, Li, "Are First-Order Diffusion Samplers Really Slower? A Fast Forward-Value
Approach", arXiv 2512.24927 (ICML 2026). Authors' code: https://github.com/Na-Li66/F-DPMSolver
(``sampler.py``, HEAD 5f02fa2); restated from ``/work/shared/methods/f-dpmsolver.md`` section 4, not copied.

Notation (VP): ``x_t = alpha_t x0 + sigma_t eps``, ``lambda_t = log(alpha_t / sigma_t)``, grid
``t_0 > t_1 > ... > t_N`` and ``h_k = lambda_{k+1} - lambda_k > 0``. One step ``k -> k+1``:

1. *Look-ahead predictor* (no model call): with the last ``q = min(k+1, p)`` model outputs
   ``e_k, ..., e_{k-q+1}`` (taken at earlier look-ahead points), fit ``P(u) = sum_j c_j u^j`` through
   ``(lambda_{k-i} - lambda_k, e_{k-i})`` and integrate the epsilon-form exponential integrator exactly::

       xhat_{k+1} = (alpha_{k+1}/alpha_k) x_k - alpha_{k+1} e^{-lambda_k} sum_j c_j phi_j(h_k),
       phi_0(h) = 1 - e^{-h},  phi_j(h) = j phi_{j-1}(h) - h^j e^{-h}     (= int_0^h e^{-u} u^j du).

   With ``q = 1`` this is a DDIM step using ``e_k``.
2. *One model call* at the look-ahead point and the **next** time: ``e_{k+1} = eps(xhat_{k+1}, t_{k+1})``,
   ``x0hat = (xhat_{k+1} - sigma_{k+1} e_{k+1}) / alpha_{k+1}``.
3. *Forward-value update* from the true state (x0 frozen at the right end of the step, the
   backward-Euler-type exponential integrator made explicit)::

       x_{k+1} = (sigma_{k+1}/sigma_k) x_k + alpha_{k+1} (1 - e^{-h_k}) x0hat.

Initialisation (``first_eps="approx"``, the paper's default): ``e_0 := x_T`` (exact in the limit
``alpha_bar_T -> 0``), so N steps cost exactly N model calls, at ``t_1 ... t_N`` (never ``t_0``).
The first look-ahead then uses the implicit denoised guess ``(x_T - sigma_0 x_T) / alpha_0 ~ (alpha_0 / 2) x_T ~ 0``,
i.e. it assumes data centred at 0. ``first_eps="mean"`` (our option) replaces it by a data mean ``mu``:
``e_0 := (x_T - alpha_0 mu) / sigma_0`` (the exact epsilon of point-mass data at ``mu``; first guess ``x0 = mu``),
still N calls. ``first_eps="evaluate"`` spends one extra call ``e_0 = eps(x_T, t_0)`` (N + 1 calls).

The diffusers contract problem and our solution
------------------------------------------------
A diffusers pipeline calls the model at *the sample it holds* and at ``scheduler.timesteps[i]``.
F-DPMSolver must call it at the look-ahead point ``xhat_{k+1}`` and at the *next* time. We therefore

* keep the true state ``x_k`` and the epsilon history **inside the scheduler**;
* expose ``timesteps = [t_1, ..., t_N]`` (free first guess: ``"approx"`` / ``"mean"``) or ``[t_0, ..., t_N]``
  ("evaluate"), i.e. exactly the times at which the model is called;
* make ``step()`` return the **next look-ahead point** as ``prev_sample`` (what the pipeline will feed
  to the model next, at the level of the next timestep), and the true ``x_N`` at the last step. On the first call
  ``step`` accepts either the unscaled latents (SD) or the scaled input (DiT); when SD-style pipelines scale the
  CFG-doubled ``[x, x]`` but step with the combined prediction, the state keeps its first copy;
* **edits are honoured**: if the ``sample`` passed to ``step`` differs in value from the ``prev_sample`` returned before
  (inpainting blends, ``callback_on_step_end``, guidance loops editing the returned tensor in place), the edited latents
  are taken as the state at that level and the model output computed there re-seeds the history - the same as a run
  started there (that step is a DDIM step). Every tensor handed out (``prev_sample``, the first ``scale_model_input``)
  is a fresh copy the caller owns, and every tensor taken in is copied, so no in-place edit on either side can reach
  the state; edits are detected by comparing values (``torch.equal``), never identity;
* **partial runs** (img2img / SDEdit): ``set_begin_index(i)`` (or, without it, the first timestep passed) starts the run
  at ``timesteps[i]``; the pipeline noised its input to that level with ``add_noise``, so the first model call is at the
  sample itself and seeds the history (no free first guess: ``x_T ~ eps`` only holds at the top of the schedule);
* with a free first guess, the first look-ahead ``xhat_1`` of a full run is produced by ``scale_model_input``
  on its first call (DiT / SD-style pipelines call it right before the model); afterwards
  ``scale_model_input`` is the identity. Pipelines that never call ``scale_model_input``
  (``DDPMPipeline``, ``DDIMPipeline``) would evaluate the first call at ``x_T`` instead of
  ``xhat_1``; the scheduler detects this and raises with a pointer to ``first_eps="evaluate"``, which
  works in every pipeline at the price of one extra model call.

Schedules: the discrete VP training schedule at integer timesteps (``timestep_spacing="linspace"``:
``round(linspace(0, T-1, N+1))`` reversed, the authors' LDM protocol; ``"leading"``: DDIM's uniform
grid with ``steps_offset``; ``"trailing"`` is treated as ``"linspace"`` because the forward-value
update needs a final noise level > 0), or Karras/EDM sigmas (``use_karras_sigmas=True``, default
``sigma_min=0.002, sigma_max=80, rho=7`` as in the paper's EDM runs) with continuous timesteps
obtained by interpolating log-sigma in the training table (``_sigma_to_t`` convention of diffusers).
"""
from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import torch
from diffusers.configuration_utils import ConfigMixin, register_to_config
from diffusers.schedulers.scheduling_utils import KarrasDiffusionSchedulers, SchedulerMixin, SchedulerOutput

__all__ = ["FDPMSolverScheduler", "first_eps_guess", "phi", "lookahead_weights", "lookahead_predict", "forward_value_update", "fdpm_sample"]


# ----------------------------------------------------------------------------- pure math


def phi(j: int, h: float) -> float:
    """``phi_j(h) = int_0^h e^{-u} u^j du`` by the recursion ``phi_j = j phi_{j-1} - h^j e^{-h}``."""
    val = -math.expm1(-h)
    for i in range(1, j + 1):
        val = i * val - h**i * math.exp(-h)
    return val


def lookahead_weights(lams: list[float], lam_k: float, h: float) -> list[float]:
    """Weights ``w_i`` with ``sum_j c_j phi_j(h) = sum_i w_i e_i`` for the Vandermonde fit.

    ``lams[i]`` is the lambda of history entry ``i`` (newest first, ``lams[0] = lam_k``); the fit is the
    polynomial through ``(lams[i] - lam_k, e_i)``. One node gives ``[phi_0(h)]``.
    """
    q = len(lams)
    u = np.array([l - lam_k for l in lams], dtype=np.float64)
    V = np.vander(u, q, increasing=True)  # V[i, j] = u_i^j
    phis = np.array([phi(j, h) for j in range(q)], dtype=np.float64)
    # c = V^{-1} e  =>  sum_j c_j phi_j = phis @ V^{-1} e
    w = np.linalg.solve(V.T, phis)
    return [float(v) for v in w]


def lookahead_predict(x_k: torch.Tensor, eps_hist: list[torch.Tensor], lam_hist: list[float], alpha_k: float, alpha_next: float, lam_k: float, lam_next: float) -> torch.Tensor:
    """Look-ahead ``xhat_{k+1}`` (paper's step 1): epsilon-form multistep exponential integrator."""
    h = lam_next - lam_k
    w = lookahead_weights(lam_hist, lam_k, h)
    integral = sum(wi * e for wi, e in zip(w, eps_hist))
    return (alpha_next / alpha_k) * x_k - alpha_next * math.exp(-lam_k) * integral


def forward_value_update(x_k: torch.Tensor, x0_next: torch.Tensor, sigma_k: float, sigma_next: float, alpha_next: float, h: float) -> torch.Tensor:
    """Paper's step 3: ``x_{k+1} = (sigma_{k+1}/sigma_k) x_k + alpha_{k+1} (1 - e^{-h}) x0hat``."""
    return (sigma_next / sigma_k) * x_k + alpha_next * (-math.expm1(-h)) * x0_next


def _to_eps_x0(model_output: torch.Tensor, x: torch.Tensor, alpha: float, sigma: float, prediction_type: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Convert a model output at ``x = alpha x0 + sigma eps`` to ``(eps, x0)``."""
    if prediction_type == "epsilon":
        eps = model_output
        return eps, (x - sigma * eps) / alpha
    if prediction_type == "sample":
        x0 = model_output
        return (x - alpha * x0) / sigma, x0
    if prediction_type == "v_prediction":
        # v = alpha eps - sigma x0 with alpha^2 + sigma^2 = 1 (Salimans & Ho 2022, eq. 9)
        return sigma * x + alpha * model_output, alpha * x - sigma * model_output
    raise ValueError(f"prediction_type must be epsilon, sample or v_prediction, got {prediction_type!r}")


def first_eps_guess(x_T: torch.Tensor, alpha_0: float, sigma_0: float, first_eps: str, data_mean: float | list[float] = 0.0) -> torch.Tensor:
    """The free first entry ``e_0`` of the epsilon history (no model call).

    ``"approx"`` (paper): ``e_0 = x_T``; its implicit denoised guess ``(x_T - sigma_0 e_0) / alpha_0`` is ~0.
    ``"mean"``: ``e_0 = (x_T - alpha_0 mu) / sigma_0`` with ``mu = data_mean`` (scalar or one value per channel, dim 1),
    whose denoised guess is exactly ``mu``.
    """
    if first_eps == "approx":
        return x_T
    if first_eps == "mean":
        mu = torch.as_tensor(data_mean, dtype=x_T.dtype, device=x_T.device)
        if mu.ndim == 1 and x_T.ndim >= 2:
            if mu.shape[0] != x_T.shape[1]:
                raise ValueError(f"data_mean has {mu.shape[0]} values; the sample has {x_T.shape[1]} channels")
            mu = mu.reshape(1, -1, *([1] * (x_T.ndim - 2)))
        elif mu.ndim > 1:
            raise ValueError("data_mean must be a scalar or one value per channel")
        return (x_T - alpha_0 * mu) / sigma_0
    raise ValueError(f"first_eps must be approx, mean or evaluate, got {first_eps!r}")


def fdpm_sample(model_fn, x_T: torch.Tensor, alphas: list[float], sigmas: list[float], timesteps: list[Any] | None = None, order: int = 1, first_eps: str = "approx", prediction_type: str = "epsilon", data_mean: float | list[float] = 0.0) -> torch.Tensor:
    """Direct (non-diffusers) F-DPMSolver loop over an arbitrary grid ``(alpha_k, sigma_k)``, k = 0..N.

    ``model_fn(x, t)`` returns the model output at grid time ``t = timesteps[k]`` (default: ``k``).
    Works for any ``x = alpha x0 + sigma eps`` parametrisation (VP, rectified flow ``alpha = 1 - sigma``).
    """
    N = len(alphas) - 1
    ts = list(range(N + 1)) if timesteps is None else list(timesteps)
    lam = [math.log(a / s) for a, s in zip(alphas, sigmas)]
    x = x_T
    if first_eps == "evaluate":
        hist = [_to_eps_x0(model_fn(x_T, ts[0]), x_T, alphas[0], sigmas[0], prediction_type)[0]]
    else:
        hist = [first_eps_guess(x_T, alphas[0], sigmas[0], first_eps, data_mean)]
    lam_hist = [lam[0]]
    for k in range(N):
        xhat = lookahead_predict(x, hist, lam_hist, alphas[k], alphas[k + 1], lam[k], lam[k + 1])
        eps, x0 = _to_eps_x0(model_fn(xhat, ts[k + 1]), xhat, alphas[k + 1], sigmas[k + 1], prediction_type)
        x = forward_value_update(x, x0, sigmas[k], sigmas[k + 1], alphas[k + 1], lam[k + 1] - lam[k])
        hist = ([eps] + hist)[:order]
        lam_hist = ([lam[k + 1]] + lam_hist)[:order]
    return x


# ----------------------------------------------------------------------------- the scheduler


def _betas(num_train_timesteps: int, beta_start: float, beta_end: float, beta_schedule: str, trained_betas: Any) -> torch.Tensor:
    if trained_betas is not None:
        return torch.tensor(trained_betas, dtype=torch.float64)
    if beta_schedule == "linear":
        return torch.linspace(beta_start, beta_end, num_train_timesteps, dtype=torch.float64)
    if beta_schedule == "scaled_linear":
        return torch.linspace(beta_start**0.5, beta_end**0.5, num_train_timesteps, dtype=torch.float64) ** 2
    if beta_schedule == "squaredcos_cap_v2":
        f = lambda t: math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2  # noqa: E731
        return torch.tensor([min(1 - f((i + 1) / num_train_timesteps) / f(i / num_train_timesteps), 0.999) for i in range(num_train_timesteps)], dtype=torch.float64)
    raise NotImplementedError(f"{beta_schedule} is not implemented for FDPMSolverScheduler")


class FDPMSolverScheduler(SchedulerMixin, ConfigMixin):
    """F-DPMSolver / F-DDIM (arXiv 2512.24927): forward-value first-order sampler with a cheap look-ahead.

    Args:
        num_train_timesteps, beta_start, beta_end, beta_schedule, trained_betas: the VP training schedule.
        solver_order: order ``p`` of the look-ahead predictor (1 = "F-DDIM", the paper's tabulated default).
        prediction_type: ``"epsilon"``, ``"sample"`` or ``"v_prediction"``.
        first_eps: how the epsilon history starts (see :func:`first_eps_guess`): ``"approx"`` (the paper's
            ``e_0 := x_T``, N model calls for N steps), ``"mean"`` (``e_0 := (x_T - alpha_0 mu) / sigma_0`` with
            ``mu = data_mean``: the first look-ahead uses the data mean as its x0 guess instead of ~0; still N calls;
            our option, not the paper's) or ``"evaluate"`` (``e_0 = eps(x_T, t_0)``, N + 1 calls).
        data_mean: ``mu`` of ``first_eps="mean"``: a scalar or one value per channel (dim 1 of the sample).
        timestep_spacing: ``"linspace"`` (paper, LDM), ``"leading"`` (DDIM-style) or ``"trailing"`` (= linspace).
        steps_offset: added to ``"leading"`` timesteps (DDIM convention).
        use_karras_sigmas: Karras/EDM noise levels between ``sigma_min`` and ``sigma_max`` with exponent ``rho``
            (defaults: the training table's extremes; the paper's EDM runs use 0.002 / 80 / 7).
        rescale_betas_zero_snr, thresholding: accepted so that ``from_config`` of a DDIM/DPM-Solver config passes
            them on; ``True`` is refused (not supported: zero terminal SNR makes ``alpha_0 = 0``, where the
            look-ahead's ``x_T / alpha_0`` is undefined; dynamic thresholding is not part of the method).
    See the module docstring for how the look-ahead is fitted into the diffusers pipeline contract.
    """

    _compatibles = [e.name for e in KarrasDiffusionSchedulers]
    order = 1

    @register_to_config
    def __init__(
        self,
        num_train_timesteps: int = 1000,
        beta_start: float = 0.0001,
        beta_end: float = 0.02,
        beta_schedule: str = "linear",
        trained_betas: np.ndarray | list[float] | None = None,
        solver_order: int = 1,
        prediction_type: Literal["epsilon", "sample", "v_prediction"] = "epsilon",
        first_eps: Literal["approx", "mean", "evaluate"] = "approx",
        data_mean: float | list[float] = 0.0,
        timestep_spacing: Literal["linspace", "leading", "trailing"] = "linspace",
        steps_offset: int = 0,
        use_karras_sigmas: bool = False,
        sigma_min: float | None = None,
        sigma_max: float | None = None,
        rho: float = 7.0,
        rescale_betas_zero_snr: bool = False,
        thresholding: bool = False,
    ):
        if solver_order < 1:
            raise ValueError(f"solver_order must be >= 1, got {solver_order}")
        if prediction_type not in ("epsilon", "sample", "v_prediction"):
            raise NotImplementedError(f"prediction_type {prediction_type!r} is not supported by FDPMSolverScheduler")
        if first_eps not in ("approx", "mean", "evaluate"):
            raise ValueError(f"first_eps must be 'approx', 'mean' or 'evaluate', got {first_eps!r}")
        if timestep_spacing not in ("linspace", "leading", "trailing"):
            raise ValueError(f"unsupported timestep_spacing {timestep_spacing!r}")
        if rescale_betas_zero_snr:
            raise NotImplementedError(
                "FDPMSolverScheduler does not support rescale_betas_zero_snr=True: zero terminal SNR gives alpha_0 = 0, "
                "where the look-ahead predictor (which divides by alpha_0) is undefined; use a scheduler that supports it "
                "(e.g. DDIMScheduler) or load the config with rescale_betas_zero_snr=False (a different model schedule)"
            )
        if thresholding:
            raise NotImplementedError("FDPMSolverScheduler does not implement dynamic thresholding (thresholding=True)")
        self.betas = _betas(num_train_timesteps, beta_start, beta_end, beta_schedule, trained_betas)
        self.alphas_cumprod = torch.cumprod(1.0 - self.betas, dim=0)  # float64
        self.init_noise_sigma = 1.0
        self.num_inference_steps: int | None = None
        self.timesteps = torch.from_numpy(np.arange(num_train_timesteps)[::-1].copy())
        self._begin_index: int | None = None
        self._reset_state()

    # ------------------------------------------------------------------ grid
    def _reset_state(self) -> None:
        self._step_index: int | None = None  # None until the first scale_model_input / step of a run
        self._x: torch.Tensor | None = None  # true state x_j
        self._lookahead: torch.Tensor | None = None  # the point the model is evaluated at next
        self._seed_next = False  # the next model call is at the state itself: it seeds the eps history
        self._returned: torch.Tensor | None = None  # private tensor holding the last prev_sample's values (edit detection)
        self._eps_hist: list[torch.Tensor] = []
        self._lam_hist: list[float] = []
        self.num_edits = 0  # edited latents honoured in this run (see ``step``)

    @property
    def step_index(self) -> int | None:
        """Index into ``timesteps`` of the next model call (``None`` before the run starts), as in diffusers."""
        return self._step_index

    @property
    def begin_index(self) -> int | None:
        """First index into ``timesteps`` of a partial run (img2img), set by :meth:`set_begin_index`."""
        return self._begin_index

    def set_begin_index(self, begin_index: int = 0) -> None:
        """Start the run at ``timesteps[begin_index]`` (diffusers' img2img / SDEdit protocol: the pipeline noises its
        input to ``timesteps[begin_index]`` with :meth:`add_noise` and calls the model there first)."""
        self._begin_index = int(begin_index)

    def _log_sigmas(self) -> np.ndarray:
        ab = self.alphas_cumprod.numpy()
        return 0.5 * np.log((1 - ab) / ab)

    def _sigma_to_t(self, sigma: np.ndarray) -> np.ndarray:
        """Continuous timestep of EDM noise level ``sigma``: linear in log-sigma between table entries,
        extrapolated linearly beyond the table (the inverse of ``zoo.common.gmm.VPSchedule.alpha_bar``)."""
        ls = self._log_sigmas()
        T = len(ls)
        out = []
        for s in np.atleast_1d(sigma):
            l = math.log(s)
            i = int(np.clip(np.searchsorted(ls, l) - 1, 0, T - 2))
            out.append(i + (l - ls[i]) / (ls[i + 1] - ls[i]))
        return np.array(out, dtype=np.float64)

    def _t_to_sigma(self, t: np.ndarray) -> np.ndarray:
        """EDM noise level at (fractional) training timesteps: log-sigma interpolated between table entries."""
        ls = self._log_sigmas()
        t = np.asarray(t, dtype=np.float64)
        lo = np.clip(np.floor(t), 0, len(ls) - 2).astype(np.int64)
        return np.exp(ls[lo] + (t - lo) * (ls[lo + 1] - ls[lo]))

    def set_timesteps(self, num_inference_steps: int | None = None, device: str | torch.device | None = None, sigmas: list[float] | None = None) -> None:
        """Build the N + 1 point grid ``t_0 > ... > t_N`` and the model-call timesteps.

        ``sigmas`` (optional, N + 1 decreasing EDM noise levels > 0) overrides the schedule. With integer spacings,
        ``num_inference_steps`` up to ``num_train_timesteps`` is allowed (DDIM's contract); when the N + 1 grid points
        cannot all be distinct integers (N = T) the grid uses fractional training timesteps ``linspace(0, T-1, N+1)``
        (log-sigma interpolated, the Karras-grid convention; the model then sees float timesteps).
        """
        T = self.config.num_train_timesteps
        if sigmas is not None:
            sig = np.asarray(sigmas, dtype=np.float64)
            if sig.ndim != 1 or len(sig) < 2 or not np.all(np.diff(sig) < 0) or sig[-1] <= 0:
                raise ValueError("sigmas: need >= 2 strictly decreasing noise levels ending above zero (the last model call is at the final level)")
            num_inference_steps = len(sig) - 1
            t_grid = self._sigma_to_t(sig)
            continuous = True
        else:
            if num_inference_steps is None or num_inference_steps < 1:
                raise ValueError(f"num_inference_steps must be >= 1, got {num_inference_steps}")
            if num_inference_steps > T:
                raise ValueError(f"num_inference_steps ({num_inference_steps}) cannot be larger than num_train_timesteps ({T})")
            N = num_inference_steps
            if self.config.use_karras_sigmas:
                ls = self._log_sigmas()
                smin = self.config.sigma_min if self.config.sigma_min is not None else float(np.exp(ls[0]))
                smax = self.config.sigma_max if self.config.sigma_max is not None else float(np.exp(ls[-1]))
                r = self.config.rho
                ramp = np.linspace(0, 1, N + 1)
                sig = (smax ** (1 / r) + ramp * (smin ** (1 / r) - smax ** (1 / r))) ** r
                t_grid = self._sigma_to_t(sig)
                continuous = True
            else:
                if self.config.timestep_spacing == "leading":
                    ratio = T // N
                    t_int = (np.arange(0, N + 1) * ratio)[::-1] + self.config.steps_offset
                    t_int = np.clip(t_int, 0, T - 1)
                else:  # linspace (paper's LDM protocol); trailing maps here (final sigma must stay > 0)
                    t_int = np.linspace(0, T - 1, N + 1).round()[::-1]
                t_int = t_int.astype(np.int64)
                if len(np.unique(t_int)) == N + 1:
                    t_grid, continuous = t_int, False
                else:  # N = T (or "leading" with too few distinct points): fractional grid
                    t_grid, continuous = np.linspace(0, T - 1, N + 1)[::-1].copy(), True
                sig = self._t_to_sigma(t_grid)
        if not np.all(np.diff(sig) < 0) or sig[-1] <= 0:
            raise ValueError("the noise levels must decrease strictly and end above zero (the last model call is at the final level)")
        self.num_inference_steps = num_inference_steps
        ab = 1.0 / (1.0 + sig**2)
        self.grid_sigmas = torch.from_numpy(sig.copy())  # EDM noise levels, float64, N + 1
        self.grid_alphas = [math.sqrt(a) for a in ab]
        self.grid_vp_sigmas = [math.sqrt(1 - a) for a in ab]
        self.grid_lambdas = [math.log(a / s) for a, s in zip(self.grid_alphas, self.grid_vp_sigmas)]
        tg = torch.from_numpy(np.asarray(t_grid).copy())
        tg = tg.to(torch.float32) if continuous else tg.to(torch.int64)
        self.grid_timesteps = tg
        start = 0 if self.config.first_eps == "evaluate" else 1
        self.timesteps = tg[start:].to(device) if device is not None else tg[start:].clone()
        self._begin_index = None
        self._reset_state()

    # ------------------------------------------------------------------ pipeline protocol
    @property
    def _grid_offset(self) -> int:
        """Grid index of ``timesteps[0]``: 1 when the run starts with a free first guess, 0 with "evaluate"."""
        return 0 if self.config.first_eps == "evaluate" else 1

    def _compute_dtype(self, sample: torch.Tensor) -> torch.dtype:
        return torch.float64 if sample.dtype == torch.float64 else torch.float32

    def index_for_timestep(self, timestep: Any) -> int:
        """Index of ``timestep`` in ``timesteps`` (the run's first call, when no begin index was set)."""
        t = torch.as_tensor(timestep).detach().reshape(-1)[:1].to("cpu", torch.float64)
        hits = (self.timesteps.detach().to("cpu", torch.float64) == t).nonzero()
        if len(hits) == 0:
            raise ValueError(
                f"timestep {float(t[0])} is not one of this scheduler's timesteps; F-DPMSolver steps between consecutive "
                "grid points, so a run must start at one of scheduler.timesteps (or call set_begin_index)"
            )
        return int(hits[0])

    def _start(self, sample: torch.Tensor, timestep: Any) -> None:
        """First call of a run: a full run from ``t_0`` with a free first guess (the model is then called at the
        look-ahead ``xhat_1``), or a run started at ``timesteps[i]`` (img2img, ``first_eps="evaluate"``): the model is
        called at the sample itself, and that call seeds the epsilon history."""
        i = self._begin_index if self._begin_index is not None else self.index_for_timestep(timestep)
        if not 0 <= i < len(self.timesteps):
            raise ValueError(f"begin index {i} is outside 0..{len(self.timesteps) - 1}")
        self._step_index = i
        j = i + self._grid_offset
        self._x = sample.to(self._compute_dtype(sample), copy=True)  # private: the caller may reuse ``sample`` in place
        if j == 1 and self._grid_offset == 1:  # full run: free first guess, first call at xhat_1
            self._eps_hist = [first_eps_guess(self._x, self.grid_alphas[0], self.grid_vp_sigmas[0], self.config.first_eps, self.config.data_mean)]
            self._lam_hist = [self.grid_lambdas[0]]
            self._lookahead = self._predict(0)
            self._seed_next = False
        else:
            self._lookahead = self._x
            self._seed_next = True

    def _match_batch(self, batch: int) -> None:
        """SD-style pipelines call ``scale_model_input`` on the CFG-doubled latents ``[x, x]`` but ``step`` with the
        combined (un-doubled) noise prediction: keep the first copy of the state (both copies are identical)."""
        n = self._x.shape[0]
        if n == batch:
            return
        if n % batch != 0:
            raise ValueError(f"model_output has batch {batch} but the scheduler state has batch {n}")
        self._x = self._x[:batch]
        self._lookahead = self._lookahead[:batch]
        self._eps_hist = [e[:batch] for e in self._eps_hist]

    def _edited(self, sample: torch.Tensor) -> bool:
        """Whether ``sample`` differs **in value** from the latents this scheduler returned last (a blend, a callback
        edit, or an in-place edit such as ``latents.mul_(0.5).add_(0.3)`` of the returned tensor itself).

        ``self._returned`` is the scheduler's own tensor with the values it handed out as a copy (the caller's tensor
        may have been changed in place, so identity says nothing). Cost: one ``torch.equal`` per step, i.e. one read of both latent tensors
        and, on an accelerator, one host synchronisation (measured in the card; negligible next to a model call)."""
        ref = self._returned
        if ref is None:
            return False
        if sample.shape[1:] != ref.shape[1:]:
            raise ValueError(f"sample has shape {tuple(sample.shape)}; the scheduler returned {tuple(ref.shape)}")
        b, r = sample.shape[0], ref.shape[0]
        if b != r:  # CFG doubling on one side only: compare the first copy
            if max(b, r) % min(b, r):
                raise ValueError(f"sample has batch {b}; the scheduler returned batch {r}")
            n = min(b, r)
            sample, ref = sample[:n], ref[:n]
        return not torch.equal(sample, ref.to(sample.dtype))

    def _predict(self, k: int) -> torch.Tensor:
        a, lam = self.grid_alphas, self.grid_lambdas
        return lookahead_predict(self._x, self._eps_hist, self._lam_hist, a[k], a[k + 1], lam[k], lam[k + 1])

    def scale_model_input(self, sample: torch.Tensor, timestep: Any = None) -> torch.Tensor:
        """First call of a run: store the state and return the point the model must see (the look-ahead ``xhat_1``
        for a full run with a free first guess; the sample itself otherwise). Later calls, and calls before
        ``set_timesteps``: identity (``step`` already returned the look-ahead point)."""
        if self.num_inference_steps is None:
            return sample
        if self._step_index is None:
            self._start(sample, timestep)
            return self._lookahead.to(sample.dtype, copy=True)  # the caller's tensor: the look-ahead stays private
        return sample

    def step(
        self,
        model_output: torch.Tensor,
        timestep: Any,
        sample: torch.Tensor,
        eta: float = 0.0,
        use_clipped_model_output: bool = False,
        generator: Any = None,
        variance_noise: torch.Tensor | None = None,
        return_dict: bool = True,
    ) -> SchedulerOutput | tuple:
        """Consume the model output at the current look-ahead point; return the next look-ahead point
        (or the final sample ``x_N`` after the last step) as ``prev_sample``.

        The signature is DDIMScheduler's (``eta`` may be passed positionally); ``eta`` must be 0 (a deterministic ODE
        sampler), ``use_clipped_model_output`` / ``generator`` / ``variance_noise`` have nothing to act on.

        Edited latents are honoured: when ``sample`` differs from the ``prev_sample`` returned by the previous step
        (an inpainting blend, a ``callback_on_step_end`` edit), the edited sample is taken as the state at the
        current grid level and the model output just computed there (the pipeline evaluated the model at the edited
        latents) re-seeds the epsilon history - exactly what a run started at this timestep from the edited latents
        (img2img) does. That step is then a DDIM step, not a forward-value step (``num_edits`` counts them).
        """
        if self.num_inference_steps is None:
            raise ValueError("call set_timesteps before step")
        if eta:
            raise ValueError("FDPMSolverScheduler is a deterministic ODE sampler (eta must be 0)")
        if self._step_index is None:
            i = self._begin_index if self._begin_index is not None else self.index_for_timestep(timestep)
            if i + self._grid_offset == 1 and self._grid_offset == 1:
                raise ValueError(
                    f"FDPMSolverScheduler(first_eps={self.config.first_eps!r}) must produce the first look-ahead point in "
                    "scale_model_input, which this pipeline did not call before the model. Use "
                    "FDPMSolverScheduler.from_config(config, first_eps='evaluate') (one extra model call) for "
                    "pipelines that never call scale_model_input (e.g. DDPMPipeline, DDIMPipeline)."
                )
            self._start(sample, timestep)
        elif self._edited(sample):
            self._x = sample.to(self._compute_dtype(sample), copy=True)
            self._lookahead = self._x
            self._seed_next = True
            self.num_edits += 1
        i = self._step_index
        if i >= len(self.timesteps):
            raise IndexError("step called more times than there are timesteps; call set_timesteps again")
        self._match_batch(model_output.shape[0])
        cdt = self._compute_dtype(model_output)
        out = model_output.to(cdt)
        j = i + self._grid_offset  # grid index of this model evaluation
        a, s, lam = self.grid_alphas, self.grid_vp_sigmas, self.grid_lambdas
        xeval = self._lookahead.to(cdt)
        eps, x0 = _to_eps_x0(out, xeval, a[j], s[j], self.config.prediction_type)
        p = self.config.solver_order
        if self._seed_next:  # the call was at the state itself: it only seeds the history
            self._x = xeval
            self._eps_hist, self._lam_hist = [eps], [lam[j]]
            self._seed_next = False
        else:
            self._x = forward_value_update(self._x.to(cdt), x0, s[j - 1], s[j], a[j], lam[j] - lam[j - 1])
            self._eps_hist = ([eps] + self._eps_hist)[:p]
            self._lam_hist = ([lam[j]] + self._lam_hist)[:p]
        self._step_index = i + 1
        N = self.num_inference_steps
        if j == N:
            prev = self._x
            self._lookahead = None
        else:
            self._lookahead = self._predict(j)
            prev = self._lookahead
        self._returned = prev  # a private tensor (never handed out): edits are detected against these values
        prev = prev.to(sample.dtype, copy=True)  # the caller owns ``prev_sample`` and may edit it in place
        if not return_dict:
            return (prev,)
        return SchedulerOutput(prev_sample=prev)

    # ------------------------------------------------------------------ misc diffusers API
    def add_noise(self, original_samples: torch.Tensor, noise: torch.Tensor, timesteps: Any) -> torch.Tensor:
        """Forward diffusion ``sqrt(ab_t) x0 + sqrt(1 - ab_t) eps`` at (possibly fractional) training timesteps.

        ``timesteps`` may be an int, a float, a sequence or a tensor on any device (the coefficients are computed in
        float64 on the CPU and moved to ``original_samples``' device and dtype)."""
        t = torch.as_tensor(timesteps).detach().to("cpu", torch.float64).reshape(-1)
        lsig = torch.from_numpy(np.log(self._t_to_sigma(t.numpy())))
        ab = 1.0 / (1.0 + torch.exp(2 * lsig))
        shape = (-1,) + (1,) * (original_samples.ndim - 1)
        a = ab.sqrt().reshape(shape).to(original_samples)
        sg = (1 - ab).sqrt().reshape(shape).to(original_samples)
        return a * original_samples + sg * noise.to(original_samples)

    def __len__(self) -> int:
        return self.config.num_train_timesteps
