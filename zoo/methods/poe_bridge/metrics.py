"""Cheap metric checks ``fn(pipeline) -> float`` on the toy variant, and the evaluation loop shared
with the benchmark ``zoo.methods.poe_bridge.benchmark`` (``zoo bench poe-bridge``)."""
from __future__ import annotations

from registry.contract import metric_check

from typing import Any

from zoo.common.rows import independent_rows
from zoo.common.toy_text import ArithTokenizer

from .speed import Stopwatch

CHECK_PROBLEMS = 64  # the conformance checks use the same 64 held-out problems as the benchmark (a few seconds)


def evaluate(procedure: Any, n_problems: int = 64, seed0: int = 0, progress: bool = False) -> dict[str, float]:
    """Exact-match accuracy and cost of a text sampler on the held-out toy problems, each problem its own call
    with its own seed (:func:`zoo.common.rows.independent_rows`: problem ``i`` gets ``row_seed(seed0, i)``, ``= i``
    for ``seed0 = 0``); one call over all prompts would give every row the same stream. The problems and
    the correctness rule are the task of the sampler's tokenizer (``eval_problems``, ``is_correct``: the
    3-digit step task without one). Times: ``wall_s`` (on CUDA after a device synchronisation) and
    ``cpu_s``, the calling thread's CPU time (:class:`~.speed.Stopwatch`)."""
    tok = procedure.tokenizer() if hasattr(procedure, "tokenizer") else None
    if not hasattr(tok, "eval_problems"):
        tok = ArithTokenizer(3)
    probs = tok.eval_problems(n_problems)
    with Stopwatch(getattr(procedure, "device", "cpu")) as sw:
        out = independent_rows(lambda ex, s: procedure(ex.prompt, seed=s), probs, seed0,
                               progress=type(procedure).__name__ if progress else None)
    wall = sw.wall
    correct = sum(tok.is_correct(ex.prompt, text) for ex, text in zip(probs, out.texts))
    tokens = sum(st["new_tokens"] for st in out.stats)
    dlm = sum(st.get("dlm_forwards", 0) for st in out.stats)
    ar = sum(st.get("ar_forwards", 0) for st in out.stats)
    n = len(probs)
    return {"accuracy": correct / n, "dlm_forwards": dlm / n, "ar_forwards": ar / n, "tokens_per_s": tokens / wall,
            "wall_s": wall, "cpu_s": sw.cpu, "tokens_per_cpu_s": tokens / sw.cpu, "tokens": tokens / n}


def evaluate_once(pipeline: Any, sampler: str | None = None, n_problems: int = CHECK_PROBLEMS) -> dict[str, float]:
    """:func:`evaluate` of one of the pipeline's samplers, computed once per pipeline
    (``Pipeline.memo``): the accuracy, tokens-per-forward and forward-count checks share it."""
    proc = pipeline.procedure if sampler is None else pipeline.procedures[sampler]
    if not hasattr(pipeline, "memo"):  # a stand-in pipeline in a test
        return evaluate(proc, n_problems)
    return pipeline.memo(("poe_bridge.evaluate", sampler or pipeline.default, n_problems), lambda: evaluate(proc, n_problems))


@metric_check
def toy_accuracy(pipeline: Any) -> float:
    """Exact-match accuracy of the pipeline's default sampler on the 64 held-out toy additions."""
    return evaluate_once(pipeline)["accuracy"]


@metric_check
def tokens_per_ar_forward(pipeline: Any) -> float:
    """New tokens per AR-target forward of the default sampler on the 64 held-out problems (deterministic
    for the fixed seeds; plain AR decoding gives 1.0)."""
    r = evaluate_once(pipeline)
    return r["tokens"] / r["ar_forwards"]


@metric_check
def dlm_forwards_per_problem(pipeline: Any) -> float:
    """DLM forwards per problem of the default sampler on the 64 held-out problems."""
    return evaluate_once(pipeline)["dlm_forwards"]


@metric_check
def toy_accuracy_vs_ar(pipeline: Any) -> float:
    """Accuracy of the default sampler divided by that of plain greedy AR decoding of the same target."""
    from .baselines import ARDecoding

    ar = ARDecoding(models={"target": pipeline.models["target"]}, params=ARDecoding.Params(), device="cpu")
    base = evaluate(ar, CHECK_PROBLEMS)["accuracy"]
    return evaluate_once(pipeline)["accuracy"] / base if base else float("nan")


@metric_check
def forward_count_speedup_vs_dlm_decoding(pipeline: Any) -> float:
    """Forwards of standard DLM decoding (entropy, 2 tokens/step) over DLM + AR forwards of the default
    sampler: the speedup when both models cost the same per forward."""
    from zoo.common.masked_dlm import ConfidenceDecoding

    dlm = ConfidenceDecoding(models={"proposal": pipeline.models["proposal"]},
                             params=ConfidenceDecoding.Params(tokens_per_step=2, alg="entropy"), device="cpu")
    base = evaluate(dlm, CHECK_PROBLEMS)["dlm_forwards"]
    r = evaluate_once(pipeline)
    return base / (r["dlm_forwards"] + r["ar_forwards"])


@metric_check
def direct_is_accuracy(pipeline: Any) -> float:
    """Accuracy of the no-bridge baseline sampler ``direct-is`` of the spec."""
    return evaluate_once(pipeline, "direct-is")["accuracy"]


def pair_counts(models: dict[str, Any], n_problems: int = CHECK_PROBLEMS, spec_params: dict[str, dict] | None = None) -> dict[str, Any]:
    """The deterministic counters of one model pair (roles ``proposal``, ``target``) on the held-out problems,
    for comparing training seeds: accuracy and forwards per problem of AR decoding, DLM decoding (entropy, 2
    tokens/step) and PoE-Bridge with K = 1 and K = 4 (``spec_params``: sampler name -> params, default the
    sampler defaults with ``n_lanes`` 1 and 4), and each PoE row's forward-count speedup over DLM decoding."""
    from zoo.common.masked_dlm import ConfidenceDecoding

    from .baselines import ARDecoding
    from .sampler import PoEBridgeSampler

    spec_params = spec_params or {"poe-bridge-k1": {"n_lanes": 1}, "poe-bridge": {"n_lanes": 4}}
    rows = {"ar": ARDecoding({"target": models["target"]}, ARDecoding.Params()),
            "dlm": ConfidenceDecoding({"proposal": models["proposal"]}, ConfidenceDecoding.Params(tokens_per_step=2, alg="entropy"))}
    rows.update({name: PoEBridgeSampler(models, PoEBridgeSampler.Params(**prm)) for name, prm in spec_params.items()})
    out: dict[str, Any] = {}
    for name, proc in rows.items():
        r = evaluate(proc, n_problems)
        out[name] = {k: r[k] for k in ("accuracy", "dlm_forwards", "ar_forwards", "tokens")}
    for name in spec_params:
        r = out[name]
        r["forward_count_speedup"] = (out["dlm"]["dlm_forwards"] / out["dlm"]["tokens"]) / (
            (r["dlm_forwards"] + r["ar_forwards"]) / r["tokens"])
        r["tokens_per_ar_forward"] = r["tokens"] / r["ar_forwards"]
    return out
