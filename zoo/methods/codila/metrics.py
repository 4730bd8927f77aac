"""Metric checks ``fn(pipeline, ...) -> float`` on the toy variants, and the evaluation loop shared with the
benchmark ``zoo.methods.codila.benchmark`` (``zoo bench codila``).

Validity is exact membership in the toy law's support (:class:`~zoo.methods.codila.tasks.Task`). Samples are
drawn unconditionally (BOS only) from one generator seeded by ``seed``, so every number is reproducible.
"""
from __future__ import annotations

import math
import time
from typing import Any

from registry.contract import metric_check

from .params import CHECK_SAMPLES, BlockTokenLossGapParams, TokensPerDLMForwardParams, ValidityParams, WordValidityParams
from .tasks import Task
from .training import loss_gap


def evaluate(procedure: Any, task: Task, n: int, seed: int = 0) -> dict[str, float]:
    """Sequence validity, per-word validity (with its binomial standard error), DLM and local-AR forwards
    per sample, tokens per DLM forward and wall time of ``n`` unconditional samples of ``procedure``."""
    t0 = time.perf_counter()
    out = procedure(seed=seed, num_samples=n)
    wall = time.perf_counter() - t0
    seq_ok = words_ok = words = tokens = dlm = ar = 0
    for text, st in zip(out.texts, out.stats):
        wv = task.word_validity(text)
        seq_ok += task.valid(text)
        words_ok += sum(wv)
        words += len(wv)
        tokens += st["new_tokens"]
        dlm += st.get("dlm_forwards", 0)
        ar += st.get("ar_forwards", 0)
    wv = words_ok / words
    return {"validity": seq_ok / n, "word_validity": wv, "word_validity_se": math.sqrt(max(wv * (1 - wv), 1e-12) / words),
            "dlm_forwards": dlm / n, "ar_forwards": ar / n, "tokens_per_dlm_forward": tokens / max(dlm, 1),
            "wall_s": wall, "samples": n}


def _task(pipeline: Any) -> Task:
    tok = getattr(pipeline.models["dlm"], "zoo_tokenizer", None)
    name = getattr(tok, "zoo_task", None)
    if name is None:
        raise ValueError("codila metric checks run on the toy variants (a DLM whose tokenizer names its task)")
    return Task(name)


def evaluate_once(pipeline: Any, sampler: str, n: int = CHECK_SAMPLES, seed: int = 0) -> dict[str, float]:
    """:func:`evaluate` of one of the pipeline's samplers, computed once per pipeline (``Pipeline.memo``)."""
    proc = pipeline.procedures[sampler]
    if not hasattr(pipeline, "memo"):
        return evaluate(proc, _task(pipeline), n, seed)
    return pipeline.memo(("codila.evaluate", sampler, n, seed), lambda: evaluate(proc, _task(pipeline), n, seed))


@metric_check(params=ValidityParams)
def validity(pipeline: Any, sampler: str = "codila-static", n: int = CHECK_SAMPLES) -> float:
    """Fraction of ``n`` unconditional samples (seed 0) of ``sampler`` that lie in the toy law's support."""
    return evaluate_once(pipeline, sampler, n)["validity"]


@metric_check(params=WordValidityParams)
def word_validity(pipeline: Any, sampler: str = "dlm-parallel", n: int = CHECK_SAMPLES) -> float:
    """Fraction of valid two-letter words over ``n`` unconditional samples of ``sampler`` (XOR toy: exactly 0.25
    for one-shot parallel decoding of a fully masked word from exact marginals)."""
    return evaluate_once(pipeline, sampler, n)["word_validity"]


@metric_check(params=TokensPerDLMForwardParams)
def tokens_per_dlm_forward(pipeline: Any, sampler: str = "codila-static", n: int = CHECK_SAMPLES) -> float:
    """New tokens per DLM forward of ``sampler`` (sequential DLM decoding: 1.0)."""
    return evaluate_once(pipeline, sampler, n)["tokens_per_dlm_forward"]


@metric_check(params=BlockTokenLossGapParams)
def block_token_loss_gap(pipeline: Any, n: int = 1024, block: int = 2, seed: int = 0) -> float:
    """Token-factorised minus block NLL (nats per block) of the toy's local AR on grid-aligned, fully masked
    blocks of ``block`` positions (Theorem 3.2: the within-block total correlation, ``log 4`` for an XOR word)."""
    dlm, ar = pipeline.models["dlm"], pipeline.models["local_ar"]
    tok = dlm.zoo_tokenizer
    from .sampler import excluded_ids

    ex = excluded_ids(tok, tok.mask_token_id, tok.think_ids, allow_eos=False)
    return loss_gap(dlm, ar, _task(pipeline), tok, n, block, seed, tok.think_ids, ex)["gap"]
