"""Speed of PoE-Bridge measured so that it means something on a shared CPU (issue 40 item 2): thread-CPU
time beside wall clock, and a cost model, forwards x measured cost per forward.

Why three clocks. The paper's "~5x over standard DLM decoding" (Table 1: 100.71 vs 26.25 tok/s on GSM8K)
is a GPU claim: on one A100 a 7B forward is bound by reading the weights, so one Dream forward over
``[prompt || 256 masks]``, one Qwen2.5 forward verifying a 4-lane batch of 33 tokens and one Qwen2.5 decode
step all cost roughly the same, and the speedup is the ratio of forward *counts*. On a CPU a forward is
bound by arithmetic, so its cost grows with the tokens it processes (K lanes cost about K times one lane),
and on a machine shared with other jobs the wall clock also measures the other jobs. Hence:

* ``wall``: ``time.perf_counter`` (on CUDA after ``torch.cuda.synchronize()``), what the paper reports;
* ``cpu``: ``time.thread_time`` of the calling thread (with one torch thread every CPU kernel runs on it),
  which other processes on the machine do not inflate except through shared caches and memory bandwidth;
  on CUDA it is the host's launch time only, not the device's;
* ``model``: sum over forward kinds of (forwards per problem x cost of one such forward), the costs measured
  once per model pair by :func:`forward_costs` at the shapes the samplers use; ``cpu / model`` is then the
  share of time spent outside the network forwards (sampling, bookkeeping);
* ``fwd``: the forward-count ratio, i.e. the cost model with every forward costing the same (the paper's
  hardware regime, which a CPU cannot measure but can count exactly).

The forward-count *bound*: PoE-Bridge emitting ``N`` tokens needs at least one DLM forward (one lookahead of
``M >= N`` positions) and ``ceil(N / V)`` verify forwards, so its forward-count speedup over DLM decoding
with ``F`` forwards is at most ``F / (1 + ceil(N / V))`` (:func:`forward_count_bound`).
"""
from __future__ import annotations

import math
import statistics
import time
from typing import Any

import torch

__all__ = ["Stopwatch", "forward_costs", "verify_key", "cost_model_s", "forward_count_bound"]


def verify_key(n_lanes: int) -> str:
    """The cost key of one ``n_lanes``-lane verify forward."""
    return f"verify_k{n_lanes}_ms"


def _sync(device: Any) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


class Stopwatch:
    """Wall and thread-CPU seconds of a ``with`` block (``.wall``, ``.cpu``); on CUDA the device is
    synchronised at both ends so that the wall clock covers the kernels."""

    def __init__(self, device: Any = "cpu"):
        self.device = device
        self.wall = self.cpu = float("nan")

    def __enter__(self) -> "Stopwatch":
        _sync(self.device)
        self._w, self._c = time.perf_counter(), time.thread_time()
        return self

    def __exit__(self, *exc: Any) -> None:
        _sync(self.device)
        self.wall, self.cpu = time.perf_counter() - self._w, time.thread_time() - self._c


def forward_costs(models: dict[str, Any], lanes: tuple[int, ...] = (1, 4), window: int = 32, reps: int = 30,
                  device: Any = "cpu") -> dict[str, Any]:
    """Median cost in ms of each forward kind the benchmark rows pay for, on ``models`` (roles ``proposal``
    and ``target``), at the samplers' shapes for the pair's task:

    * ``dlm_forward_ms``: one DLM forward over ``[prompt || G masks]`` (``G`` = the models' answer region;
      every DLM forward of DLM decoding and of PoE-Bridge has this length while ``G <= M``);
    * ``verify_k{K}_ms``: one ``K``-lane verify forward, ``K x (1 + window)`` tokens after a cached prefix of
      ``prompt + G // 2`` positions (the middle of an answer);
    * ``ar_step_ms``: one AR decoding step (one token) after the same prefix.

    The clock is thread-CPU time on a CPU (``clock: "thread-cpu"``) and synchronised wall time on CUDA
    (``"cuda-wall"``); ``reps`` timed calls after one warm-up, median.
    """
    from zoo.common.ar_cache import ar_forward, cache_kwarg, cache_repeat, new_cache
    from zoo.common.masked_dlm import MaskedDenoiser, resolve_max_new_tokens
    target, proposal = models["target"], models["proposal"]
    tok = target.zoo_tokenizer
    prompt = tok.encode(tok.eval_problems(1)[0].prompt)
    G = resolve_max_new_tokens(None, target, proposal)
    den = MaskedDenoiser.wrap(proposal)
    dlm_in = torch.tensor([prompt + [den.mask_token_id] * G], device=device)
    prefix = torch.randint(4, tok.vocab_size, (1, len(prompt) + G // 2), generator=torch.Generator().manual_seed(0))
    prefix[0, : len(prompt)] = torch.tensor(prompt)
    prefix = prefix.to(device)
    kw = cache_kwarg(target)
    cuda = torch.device(device).type == "cuda"

    def cached(k: int):
        def setup():
            cache = new_cache(target)
            ar_forward(target, prefix, cache, kw)
            cache_repeat(cache, k)
            return cache
        return setup

    step = torch.tensor([[prompt[-1]]], device=device)
    kinds: dict[str, tuple[Any, Any]] = {"dlm_forward_ms": (lambda _: den(dlm_in), lambda: None)}
    for k in lanes:
        feed = torch.randint(4, tok.vocab_size, (k, 1 + window), generator=torch.Generator().manual_seed(k)).to(device)
        kinds[verify_key(k)] = (lambda cache, f=feed: ar_forward(target, f, cache, kw), cached(k))
    kinds["ar_step_ms"] = (lambda cache: ar_forward(target, step, cache, kw), cached(1))
    times: dict[str, list[float]] = {name: [] for name in kinds}
    with torch.no_grad():
        # round-robin over the kinds, so that a burst of load from other processes hits all of them alike
        for i in range(reps + 1):
            for name, (fn, setup) in kinds.items():
                state = setup()
                with Stopwatch(device) as sw:
                    fn(state)
                if i:  # round 0 is a warm-up
                    times[name].append(sw.wall if cuda else sw.cpu)
    out: dict[str, Any] = {"clock": "cuda-wall" if cuda else "thread-cpu", "answer_region": G, "window": window}
    out.update({name: statistics.median(v) * 1e3 for name, v in times.items()})
    return out


def cost_model_s(row: dict[str, float], costs: dict[str, Any], ar_key: str | None, n_problems: int) -> float:
    """Seconds the cost model predicts for a benchmark row over ``n_problems``: DLM forwards per problem x
    ``dlm_forward_ms`` + AR forwards per problem x ``costs[ar_key]`` (``ar_key``: ``"ar_step_ms"`` for AR
    decoding, :func:`verify_key` of the lane count for PoE-Bridge, None for a row without AR forwards)."""
    ms = row.get("dlm_forwards", 0.0) * costs["dlm_forward_ms"]
    if ar_key is not None:
        ms += row.get("ar_forwards", 0.0) * costs[ar_key]
    return ms * n_problems / 1e3


def forward_count_bound(dlm_decoding_forwards: float, answer_tokens: int, window: int) -> float:
    """The most a forward-count speedup over DLM decoding can be: ``F / (1 + ceil(N / V))`` for an answer of
    ``N`` tokens (EOS included), ``F`` DLM-decoding forwards and verify window ``V`` (one DLM forward whose
    lookahead covers the answer, every window accepted in full)."""
    if answer_tokens < 1 or window < 1:
        raise ValueError(f"forward_count_bound: answer_tokens and window must be >= 1, got {answer_tokens}, {window}")
    return dlm_decoding_forwards / (1 + math.ceil(answer_tokens / window))
