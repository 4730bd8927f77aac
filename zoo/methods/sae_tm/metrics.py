"""Metric checks for ``specs/sae-tm.yaml`` (``fn(pipeline) -> float``) and the shared evaluation
helpers of ``tools/bench_sae_tm.py``: NPMI coherence of top-10 words with document co-occurrence
on the 300 full lee_background.cor documents, and top-25 unique-word diversity."""
from __future__ import annotations

from registry.contract import metric_check

from typing import Any

import numpy as np

from .topics import npmi_coherence, topic_diversity


def reference_presence(vocab: list[str]) -> np.ndarray:
    """Binary document x word presence on the 300 full lee_background documents (NPMI reference)."""
    from sklearn.feature_extraction.text import CountVectorizer

    from zoo.common.corpus import lee_background

    cv = CountVectorizer(vocabulary=vocab)
    return (cv.transform(lee_background()).toarray() > 0)


def evaluate(topic_word: np.ndarray, vocab: list[str], presence: np.ndarray | None = None) -> dict[str, float]:
    """NPMI (top 10 words) and diversity (top 25 words) of a topic-word matrix."""
    presence = reference_presence(vocab) if presence is None else presence
    order = np.argsort(-np.asarray(topic_word), axis=1, kind="stable")
    top10 = [[vocab[j] for j in row[:10]] for row in order]
    top25 = [[vocab[j] for j in row[:25]] for row in order]
    index = {w: i for i, w in enumerate(vocab)}
    return {"npmi": npmi_coherence(top10, presence, index), "diversity": topic_diversity(top25)}


def _sae_tm(pipeline: Any, n: int) -> dict[str, float]:
    out = pipeline(seed=0, n_topics=n)
    proc = pipeline.procedure
    return evaluate(out["topic_word"], proc._fit["vocab"])


@metric_check
def npmi_10_topics(pipeline: Any) -> float:
    """Mean NPMI of SAE-TM's 10 topics on lee_background (toy variant)."""
    return _sae_tm(pipeline, 10)["npmi"]


@metric_check
def diversity_10_topics(pipeline: Any) -> float:
    """Top-25 unique-word diversity of SAE-TM's 10 topics (toy variant)."""
    return _sae_tm(pipeline, 10)["diversity"]


@metric_check
def newsgroup_purity_2_topics(pipeline: Any) -> float:
    """Purity of the argmax of a 2-topic merge against the alt.atheism / sci.space labels of
    gensim's mini_newsgroup (200 posts, headers stripped), stage 2 refit on these posts, seed 0."""
    from zoo.common.corpus import mini_newsgroup

    texts, labels, _ = mini_newsgroup()
    proc = pipeline.procedure
    pipeline(seed=0, texts=texts, n_topics=2)
    fit = proc._fit
    pred = proc.document_topics(proc.retopic(2)).argmax(1)
    lab = np.asarray(labels)[fit["kept"]]
    return float(sum(np.bincount(lab[pred == t]).max() for t in np.unique(pred)) / len(lab))
