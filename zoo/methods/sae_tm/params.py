"""The torch-free params module of SAE-TM, read by ``zoo validate`` (see :mod:`registry.declare`)."""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from registry import declare
from registry.contract import CliInputs, FactoryParams, Options, ProcedureParams
from zoo.common.params import TARGETS as COMMON
from zoo.common.params import SAEConfig

# ----------------------------------------------------------------------------- the topic model (pipeline)


class SAETopicModelParams(ProcedureParams):
    n_topics: int = Field(10, ge=1, le=1000)
    tau: float = Field(0.9, gt=0, le=1, description="top-mass kept per atom before merging")
    pi: float = Field(0.3, ge=0, lt=1, description="fixed background mixing weight")
    idf: bool = True
    epochs: int = Field(50, ge=1, le=10_000)
    lr: float = Field(1e-2, gt=0, le=10)
    batch_size: int = Field(128, ge=1, le=65_536)
    top_words: int = Field(10, ge=1, le=1000)
    min_df: int = Field(3, ge=1, le=1_000_000)
    max_features: int = Field(5000, ge=10, le=1_000_000)
    sentences_per_passage: int = Field(2, ge=1, le=1000)
    train_steps: int = Field(0, ge=0, le=1_000_000, description="train the SAE first (full variant: no shipped SAE)")
    train_k: int = Field(32, ge=1, le=4096)
    merge: Literal["paper", "repository"] = Field(
        "paper", description="stage-3 reading: paper (sparsified rows, 10 k-means inits) or repository "
                             "(unsparsified rows, one init as in sae_to_topic.py)")
    kmeans_seed: int | None = Field(
        None, ge=0, le=2**32 - 1,
        description="random_state of the stage-3 k-means; None: the call's seed (the stage-2 seed), so a seed "
                    "sweep varies both; 42 is the reference sae_to_topic.py's fixed value")


class SAETopicModelCli(CliInputs):  # None = not given: the spec's (or --param's) value stands
    topics: int | None = Field(None, ge=1, le=1000, description="number of topics (default: the spec's n_topics)")
    top_words: int | None = Field(None, ge=1, le=1000, description="words per topic (default: the spec's top_words)")


# ----------------------------------------------------------------------------- the benchmark (benchmark)


class BenchOptions(Options):
    topics: list[Annotated[int, Field(ge=2, le=200)]] = Field([5, 10, 20], min_length=1, max_length=16,
                                                             description="topic counts n")
    seeds: int = Field(5, ge=1, le=64, description="seeds per method (SAE-TM: seeds x seeds grid)")
    lda_iter: int = Field(50, ge=1, le=10_000, description="LDA batch iterations")
    newsgroup: bool = Field(True, description="the mini_newsgroup 2-topic purity check (--no-newsgroup skips it)")
    quick: ClassVar[dict[str, Any]] = {"topics": [10], "seeds": 1, "lda_iter": 10, "newsgroup": False}


# ----------------------------------------------------------------------------- the SAE trainer (train)


class SAEOptions(Options):
    """The shipped SAE's stage-1 recipe."""

    features: int = Field(256, ge=8, le=65_536, description="SAE width F")
    k: int = Field(8, ge=1, le=4096, description="TopK k")
    steps: int = Field(3000, ge=1, le=1_000_000, description="training steps")
    batch_size: int = Field(256, ge=1, le=65_536)
    sae_seed: int = Field(112233, ge=0, le=2**32 - 1,
                          description="the SAE's init and batch-order seed (the reference CLI's default; not ctx.seed)")
    float8: bool = Field(True, description="round-trip the embeddings through float8_e4m3fn (the reference data loader)")


# ----------------------------------------------------------------------------- metric checks (metrics)


class TopicMetricParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.sae_tm.metrics.npmi_10_topics`,
    :func:`~zoo.methods.sae_tm.metrics.c_npmi_10_topics` and :func:`~zoo.methods.sae_tm.metrics.diversity_10_topics`."""

    merge: str | None = None


TARGETS = {
    "SAETopicModel": declare.procedure(SAETopicModelParams, cli=SAETopicModelCli),
    "benchmark:run": declare.benchmark(BenchOptions),
    "train:train_sae_toy": declare.trainer(SAEOptions),
    "metrics:npmi_10_topics": declare.metric_check(TopicMetricParams),
    "metrics:c_npmi_10_topics": declare.metric_check(TopicMetricParams),
    "metrics:diversity_10_topics": declare.metric_check(TopicMetricParams),
    "metrics:newsgroup_purity_2_topics": declare.metric_check(None),
    "toy:build_minilm": declare.factory(None),
    "toy:build_sae": declare.factory(SAEConfig),
    # zoo.common's, re-exported (toy.py)
    "build_minilm_encoder": COMMON["build_minilm_encoder"],
}
