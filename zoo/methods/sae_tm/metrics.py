"""Metric checks for ``specs/sae-tm.yaml`` (``fn(pipeline) -> float``) and the shared evaluation
helpers of ``zoo.methods.sae_tm.benchmark`` (``zoo bench sae-tm``), on the 300 full lee_background.cor documents:

* ``npmi_doc``: document-level NPMI of the top-10 words (:func:`npmi_coherence`; whole-document
  co-occurrence);
* ``c_npmi``: gensim's ``c_npmi`` of the same words (:func:`windowed_c_npmi`; 10-token boolean
  sliding windows over the documents tokenised by the BoW's analyser, stop words removed);
* ``diversity``: unique fraction of the top-25 words.

SAE-TM's scores move with the stage-2 seed (init of the word logits and batch order) and with the
k-means seed of stage 3 (as much as with the first), so the spec reports the mean over the 25 cells
stage-2 seed x k-means seed, both in 0-4 (``SEEDS``)."""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from registry.contract import metric_check

import numpy as np

from .params import TopicMetricParams
from .topics import npmi_coherence, topic_diversity, windowed_c_npmi

SEEDS = (0, 1, 2, 3, 4)


def reference_presence(vocab: list[str]) -> np.ndarray:
    """Binary document x word presence on the 300 full lee_background documents (NPMI reference)."""
    from sklearn.feature_extraction.text import CountVectorizer

    from zoo.common.corpus import lee_background

    cv = CountVectorizer(vocabulary=vocab)
    return (cv.transform(lee_background()).toarray() > 0)


@lru_cache(maxsize=1)
def reference_tokens() -> tuple[tuple[str, ...], ...]:
    """The 300 lee_background documents tokenised by the BoW's analyser (lower-case, scikit-learn
    token pattern, English stop words removed): the texts of the windowed c_npmi."""
    from sklearn.feature_extraction.text import CountVectorizer

    from zoo.common.corpus import lee_background

    an = CountVectorizer(stop_words="english").build_analyzer()
    return tuple(tuple(an(d)) for d in lee_background())


def evaluate(topic_word: np.ndarray, vocab: list[str], presence: np.ndarray | None = None) -> dict[str, float]:
    """Document-level NPMI and windowed c_npmi (top 10 words), diversity (top 25 words)."""
    presence = reference_presence(vocab) if presence is None else presence
    order = np.argsort(-np.asarray(topic_word), axis=1, kind="stable")
    top10 = [[vocab[j] for j in row[:10]] for row in order]
    top25 = [[vocab[j] for j in row[:25]] for row in order]
    index = {w: i for i, w in enumerate(vocab)}
    return {"npmi_doc": npmi_coherence(top10, presence, index),
            "c_npmi": windowed_c_npmi(top10, [list(t) for t in reference_tokens()]),
            "diversity": topic_diversity(top25)}


def _sae_tm(pipeline: Any, n: int, seed: int = 0, kmeans_seed: int = 0, merge: str | None = None) -> dict[str, float]:
    """Scores of SAE-TM's n topics for one (stage-2 seed, k-means seed) cell; both merge readings are evaluated from
    one stage-2 fit and memoised on the procedure (the checks share them)."""
    proc = pipeline.procedure
    memo = proc.__dict__.setdefault("_metric_memo", {})
    if (n, seed, kmeans_seed) not in memo:
        fit = proc.fit(seed=seed)  # reused while the seed stays the same
        memo[(n, seed, kmeans_seed)] = {
            flavour: evaluate(proc.retopic(n, flavour, kmeans_seed=kmeans_seed).topic_word, fit["vocab"])
            for flavour in ("paper", "repository")}
    return memo[(n, seed, kmeans_seed)][merge or proc.params.merge]


def _over_seeds(pipeline: Any, n: int, key: str, merge: str | None) -> float:
    """Mean over the grid stage-2 seed x k-means seed (both :data:`SEEDS`): the two sources of spread of a stage-2
    fit and its merge, as ``zoo bench sae-tm`` reports them."""
    return float(np.mean([_sae_tm(pipeline, n, s, k, merge)[key] for s in SEEDS for k in SEEDS]))


@metric_check(params=TopicMetricParams)
def npmi_10_topics(pipeline: Any, merge: str | None = None) -> float:
    """Mean over stage-2 seeds x k-means seeds 0-4 of the document-level NPMI of SAE-TM's 10 topics (toy variant)."""
    return _over_seeds(pipeline, 10, "npmi_doc", merge)


@metric_check(params=TopicMetricParams)
def c_npmi_10_topics(pipeline: Any, merge: str | None = None) -> float:
    """Mean over stage-2 seeds x k-means seeds 0-4 of gensim's windowed c_npmi of SAE-TM's 10 topics (toy variant)."""
    return _over_seeds(pipeline, 10, "c_npmi", merge)


@metric_check(params=TopicMetricParams)
def diversity_10_topics(pipeline: Any, merge: str | None = None) -> float:
    """Mean over stage-2 seeds x k-means seeds 0-4 of the top-25 unique-word diversity of SAE-TM's 10 topics (toy variant)."""
    return _over_seeds(pipeline, 10, "diversity", merge)


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
