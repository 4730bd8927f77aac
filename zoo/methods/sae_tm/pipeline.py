"""The ``sae-tm`` procedure: documents -> MiniLM embeddings -> SAE atoms -> word distributions ->
any number of topics (SAE-TM, Girrbach & Akata, ICML 2026, arXiv 2511.16309).

The CPU variant's corpus is gensim's ``lee_background.cor`` split into 2-sentence passages
(1,382 passages); the BoW uses scikit-learn's ``CountVectorizer(stop_words='english',
min_df=3, max_features=5000)`` (offline replacement for the paper's NLTK stopwords +
lemmatiser). Sentence embeddings are cached on disk (``$ZOO_CACHE_DIR`` or ``~/.cache/zoo``)
keyed by the texts and the encoder, because encoding the corpus takes ~1-2 min on one CPU thread.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
import torch
from pydantic import Field

from registry.contract import cached_artifact
from registry.contract import Procedure
from registry.limits import Bound
from registry.results import ProcedureOutput
from zoo.common.activations import sentence_embeddings
from zoo.common.sae import SparseAutoencoder, TrainConfig, train_sae

from .params import SAETopicModelCli, SAETopicModelParams
from .topics import Interpretation, TopicSet, fit_interpretation, merge_atoms, normalise_theta


def default_corpus(n_docs: int | None = None, sentences_per_passage: int = 2) -> list[str]:
    """lee_background.cor split into passages of ``sentences_per_passage`` sentences."""
    from zoo.common.corpus import lee_background, passages

    return passages(lee_background(n_docs), sentences_per_passage)


def cached_embeddings(encoder: Any, texts: list[str], *, max_length: int = 256, batch_size: int = 32,
                      progress: bool = False, use_cache: bool = True) -> torch.Tensor:
    """Sentence embeddings (mean pooling + L2 norm) of ``texts``, cached in a safetensors file."""
    ident = getattr(encoder, "path", None) or getattr(getattr(encoder, "config", None), "_name_or_path", "") or type(encoder).__name__

    def produce() -> dict[str, torch.Tensor]:
        return {"emb": sentence_embeddings(encoder, texts, max_length=max_length, batch_size=batch_size, progress=progress)}

    return cached_artifact(["sae-tm-emb", str(ident), max_length, texts], produce, "safetensors",
                           namespace="sae-tm", use_cache=use_cache)["emb"]


@dataclass
class TopicModelOutput(ProcedureOutput):
    """What :class:`SAETopicModel` returns (attribute, key and index access, ``to_tuple()``).

    * ``topics`` -- the top words of each topic (n lists of ``top_words`` words);
    * ``topic_word`` -- the topic-word distributions, NumPy (n x V), rows sum to 1;
    * ``cluster_mass`` -- each topic's share of the merged atoms' mass, NumPy (n,), sums to 1;
    * ``atom_topic`` -- the topic of each SAE atom, NumPy int (K,), -1 for atoms left out;
    * ``vocab_size`` -- V; ``n_docs`` -- documents kept (with at least one vocabulary word);
    * ``n_valid_atoms`` -- atoms that took part in the merge.
    """

    topics: list[list[str]]
    topic_word: Any
    cluster_mass: Any
    atom_topic: Any
    vocab_size: int
    n_docs: int
    n_valid_atoms: int


class SAETopicModel(Procedure):
    """SAE-TM topics for a corpus: fits stage 2 once per corpus (cached on the instance) and
    merges atoms into ``n_topics`` topics; ``retopic(n)`` re-runs only stage 3.

    Returns a :class:`TopicModelOutput`: ``topics`` (top words per topic), ``topic_word`` (n x V),
    ``cluster_mass`` (n, sums to 1), ``atom_topic`` (K), ``vocab_size``, ``n_docs``, ``n_valid_atoms``.
    """

    kind = "analysis"

    Params = SAETopicModelParams
    CliInputs = SAETopicModelCli

    def __init__(self, models: Any, params: Any, device: Any = "cpu", dtype: Any = None):
        super().__init__(models, params, device, dtype)
        self._fit_key: Any = None
        self._fit: dict[str, Any] = {}

    # -- stages 1-2
    def fit(self, texts: list[str] | None = None, *, seed: int = 0, epochs: int | None = None, progress: bool = False) -> dict[str, Any]:
        from sklearn.feature_extraction.text import CountVectorizer

        p = self.params
        texts = texts if texts is not None else default_corpus(None, p.sentences_per_passage)
        key = (hashlib.sha256("\x00".join(texts).encode()).hexdigest(), seed, epochs)
        if key == self._fit_key:
            return self._fit
        cv = CountVectorizer(stop_words="english", min_df=min(p.min_df, max(1, len(texts) // 4)), max_features=p.max_features)
        counts = cv.fit_transform(texts).toarray().astype(np.float32)
        vocab = [str(w) for w in cv.get_feature_names_out()]
        keep = counts.sum(1) > 0
        texts_k = [t for t, k_ in zip(texts, keep) if k_]
        counts = counts[keep]
        enc = self.models["encoder"]
        emb = cached_embeddings(enc, texts_k, progress=progress)
        sae: SparseAutoencoder = self.models["sae"]
        if p.train_steps > 0:
            sae = SparseAutoencoder(sae.d_in, sae.n_features, sae.arch, min(p.train_k, sae.n_features), seed=seed)
            train_sae(sae, emb, TrainConfig(steps=p.train_steps, batch_size=min(1024, len(emb)), b_dec_init="geometric_median",
                                            auxk_alpha=1 / 32, seed=seed, progress=progress))
        sae = sae.cpu().float().eval()
        with torch.no_grad():
            # BatchTopK at inference: the learned global threshold once it exists, else batch top-k
            theta = normalise_theta(sae.encode(emb, use_threshold=sae.arch == "batchtopk" and float(sae.threshold) >= 0))
        interp = fit_interpretation(theta, counts, pi=p.pi, idf=p.idf, epochs=epochs or p.epochs, lr=p.lr,
                                    batch_size=p.batch_size, seed=seed, progress=progress)
        wv = cached_embeddings(enc, vocab, max_length=16, batch_size=256, progress=progress).double().numpy()
        self._fit_key = key
        self._fit = {"interp": interp, "vocab": vocab, "word_vectors": wv, "counts": counts, "texts": texts_k,
                     "theta": theta.double().numpy(), "kept": keep, "seed": int(seed)}
        return self._fit

    # -- stage 3
    def retopic(self, n_topics: int, merge: str | None = None, kmeans_seed: int | None = None) -> TopicSet:
        """Stage 3 only; ``merge`` overrides the ``merge`` param (paper / repository), ``kmeans_seed`` the k-means
        ``random_state`` (default: the ``kmeans_seed`` param, or, when that is None, the seed of the last fit)."""
        if not self._fit:
            raise RuntimeError("call the procedure (or fit) first")
        interp: Interpretation = self._fit["interp"]
        if kmeans_seed is None:
            kmeans_seed = self._fit["seed"] if self.params.kmeans_seed is None else self.params.kmeans_seed
        return merge_atoms(interp, self._fit["word_vectors"], n_topics, tau=self.params.tau,
                           random_state=int(kmeans_seed), flavour=merge or self.params.merge)  # type: ignore[arg-type]

    def document_topics(self, ts: TopicSet) -> np.ndarray:
        """Document-topic matrix theta . M (M: atom -> topic indicator) for the fitted documents
        (rows follow ``self._fit["texts"]``; documents with no vocabulary word were dropped)."""
        theta = self._fit["theta"]
        m = np.zeros((theta.shape[1], ts.topic_word.shape[0]))
        valid = ts.atom_topic >= 0
        m[np.flatnonzero(valid), ts.atom_topic[valid]] = 1.0
        return theta @ m

    def __call__(self, *, seed: int = 0, texts: Annotated[list[str], Bound("rows"), Bound("length", "longest")] | None = None,
                 n_topics: Annotated[int, Field(ge=1, le=1000)] | None = None, epochs: Annotated[int, Field(ge=1, le=10_000)] | None = None,
                 top_words: Annotated[int, Field(ge=1, le=1000)] | None = None, merge: Literal["paper", "repository"] | None = None,
                 progress: bool = False) -> TopicModelOutput:
        fit = self.fit(texts, seed=seed, epochs=epochs, progress=progress)
        n = self.params.n_topics if n_topics is None else n_topics
        ts = self.retopic(n, merge)
        return TopicModelOutput(
            topics=ts.top_words(fit["vocab"], self.params.top_words if top_words is None else top_words),
            topic_word=ts.topic_word,
            cluster_mass=ts.cluster_mass,
            atom_topic=ts.atom_topic,
            vocab_size=len(fit["vocab"]),
            n_docs=len(fit["texts"]),
            n_valid_atoms=int(len(ts.valid_atoms)),
        )

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"texts": default_corpus(12), "n_topics": 3, "epochs": 3}

    def run_cli(self, inputs: Any, seed: int) -> str:
        n = self.params.n_topics if inputs is None or inputs.topics is None else inputs.topics
        tw = self.params.top_words if inputs is None or inputs.top_words is None else inputs.top_words
        out = self(seed=seed, n_topics=n, top_words=tw, progress=True)
        lines = [f"SAE-TM: {out['n_docs']} passages of lee_background.cor, vocabulary {out['vocab_size']}, "
                 f"{out['n_valid_atoms']} atoms merged into {n} topics"]
        order = np.argsort(-out["cluster_mass"], kind="stable")
        for rank, t in enumerate(order):
            lines.append(f"topic {rank:2d} (mass {out['cluster_mass'][t]:.3f}): {' '.join(out['topics'][t])}")
        return "\n".join(lines)
