"""The torch-free params module of DPLM-Evo: the models its specs fill, read by ``zoo validate`` (see registry.declare)."""
from __future__ import annotations

from typing import Any, ClassVar, Literal, get_args

from pydantic import Field

from registry import declare
from registry.contract import CliInputs, FactoryParams, Options, ProcedureParams
from registry.limits import Rows

# ----------------------------------------------------------------------------- procedures (sampler, recipe)

class EditSamplerParams(ProcedureParams):
    mode: Literal["de-novo", "evolve", "post-edit"] = "de-novo"
    steps: int = Field(12, ge=1, le=1000)
    tau_del: float = Field(0.5, ge=0.0, le=1.0, description="delete a residue when p_del > tau_del (1.0: never)")
    tau_ins: float = Field(0.5, ge=0.0, le=1.0, description="insert a mask when p_ins > tau_ins (1.0: never)")
    tau_sub: float = Field(0.0, ge=0.0, le=1.0, description="redraw residues whose own p_sub < tau_sub (the noisy set)")
    renoise_fraction: float = Field(0.0, ge=0.0, le=1.0)
    temperature: float = Field(1.0, ge=0.0, le=10.0)
    length: int = Field(12, ge=1, le=1022, description="de novo start length (m^length) when no lengths are given")
    max_length: int = Field(28, ge=1, le=2044, description="the 2L latent size: rows never grow beyond it")
    stochastic_edits: bool = Field(False, description="delete / insert with probability p_del / p_ins (simulated evolution)")
    ancestral: bool = Field(False, description="with stochastic_edits: edit probability p * (1 - t_next / t) per step of "
                            "t = 1 - k / steps (the reverse of the linear schedule; masks may be deleted): de novo")
    renoise_omega_del: float = Field(0.0, ge=0.0, le=1.0, description="evolve: the re-noise deletes residues with "
                                     "probability renoise_fraction * omega_del (the forward kernel's deletions)")
    renoise_omega_ins: float = Field(0.0, ge=0.0, le=1.0, description="evolve: the re-noise turns latent gap slots into "
                                     "masks with probability renoise_fraction * omega_ins (the forward kernel's insertions)")
    residue_scoring: Literal["wt-marginal", "masked-marginal"] = Field(
        "wt-marginal", description="how the noisy set reads a residue's own probability (masked-marginal: masked baseline)")
    edit_sites: Literal["all", "noisy"] = Field(
        "all", description="noisy: delete only tokens of the noisy set N_t (masks, residues with own p_sub < tau_sub) and "
        "insert only right of them, as in the paper's loop ('non-noisy positions are unchanged'); all: any token or gap")
    net_role: str = Field("net", min_length=1)


class EditSamplerCli(CliInputs):
    sequence: str | None = None  # a start protein (evolve / post-edit); de novo ignores it
    length: int | None = Field(None, ge=1, le=1022)
    num_samples: Rows = 1


class TrainDPLMEvoParams(ProcedureParams):
    steps: int = Field(2500, ge=1, le=10_000_000)
    batch_size: int = Field(64, ge=1, le=65536)
    lr: float = Field(3e-3, gt=0, le=1.0)
    omega_del: float = Field(0.1, ge=0, le=1)
    omega_ins: float = Field(0.02, ge=0, le=1)
    rho_mask: float = Field(0.5, ge=0, le=1)
    kernel: Literal["contextual", "uniform", "blosum62"] = "contextual"
    gamma_sub: float = Field(1.0, ge=0, le=100)
    gamma_del: float = Field(1.0, ge=0, le=100)
    gamma_ins: float = Field(1.0, ge=0, le=100)
    warmup_fraction: float = Field(0.3, ge=0, le=1)
    weighting: Literal["elbo", "none"] = Field("elbo", description="loss weight λ_t: elbo = 1/t (the note's diffusion ELBO weight), none = 1")
    t_proposal: Literal["uniform", "square"] = Field(
        "uniform", description="how t is drawn: uniform, or square (t = t_min + (1 - t_min) u^2 with importance weight 2u: the same objective, more rows at small t)")
    n_latent: int = Field(28, ge=2, le=4096, description="the 2L latent size (2 x the longest sequence)")
    net_role: str = Field("net", min_length=1)


# ----------------------------------------------------------------------------- factories (model)

class ToyConfig(FactoryParams):
    """``config`` of :func:`build_toy` (bounded: the toy runs on a CPU)."""

    hidden_size: int = Field(64, ge=8, le=1024)
    num_hidden_layers: int = Field(2, ge=1, le=12)
    num_attention_heads: int = Field(4, ge=1, le=16)
    intermediate_size: int = Field(128, ge=8, le=4096)
    max_position_embeddings: int = Field(64, ge=8, le=1026)


class FullConfig(FactoryParams):
    """``config`` of :func:`build_dplm_150m`: ESM-2 150M's shape (DPLM 150M is initialised from it)."""

    hidden_size: int = Field(640, ge=8, le=2560)
    num_hidden_layers: int = Field(30, ge=1, le=36)
    num_attention_heads: int = Field(20, ge=1, le=40)
    intermediate_size: int = Field(2560, ge=8, le=10240)
    max_position_embeddings: int = Field(1026, ge=8, le=4096)
    token_dropout: bool = True


# ----------------------------------------------------------------------------- metric checks (metrics)

class MutationSpearmanParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.dplm_evo.metrics.mutation_spearman`."""

    scoring: str = "wt-marginal"
    role: str = "net"
    family: str = "conserved-core"
    wild_types: int = 256


class OracleMutationSpearmanParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.dplm_evo.metrics.oracle_mutation_spearman`."""

    kind: str = "law"
    family: str = "conserved-core"
    wild_types: int = 256


class LoopIndelRateParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.dplm_evo.metrics.loop_indel_rate`."""

    sampler: str = "evolve"
    n: int = 512
    seed: int = 0
    count: str = "provenance"


class DeNovoLengthTvParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.dplm_evo.metrics.de_novo_length_tv`."""

    sampler: str = "de-novo"
    n: int = 512
    seed: int = 0


class PostEditGainParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.dplm_evo.metrics.post_edit_gain`."""

    sampler: str = "post-edit"
    n: int = 64
    seed: int = 0


class SpearmanMarginParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.dplm_evo.metrics.spearman_margin`."""

    role: str = "net"
    baseline_role: str = "net_masked"
    family: str = "conserved-core"
    wild_types: int = 256


# ----------------------------------------------------------------------------- trainer (train), benchmark (benchmark)

Network = Literal["contextual", "uniform", "blosum62", "masked", "masked-elbo"]
#: the networks of :data:`.training.CONFIGS`, in its order (training checks that they agree)
NETWORKS: tuple[str, ...] = get_args(Network)
FamilyName = Literal["conserved-core", "mutation-bias"]


class FamilyTrainOptions(Options):
    """Which toy family, and which of its five networks (default all, in :data:`.training.CONFIGS` order)."""

    family: Literal["conserved-core", "mutation-bias"] = Field("conserved-core", description="the toy family trained on")
    networks: list[Network] = Field(list(NETWORKS), min_length=1, max_length=5, description="the networks trained")


NAMES = {"contextual": "DPLM-Evo (contextual kernel)", "uniform": "uniform kernel", "blosum62": "BLOSUM62 kernel",
         "masked": "masked diffusion, constant weight (dplm-masked)", "masked-elbo": "masked diffusion, ELBO weight"}
#: The networks of the scoring section (``training.CONFIGS`` names, ``evaluation.SCORED_NETWORKS``).
SCORED = tuple(NAMES)


class BenchOptions(Options):
    rows: int = Field(64, ge=1, le=5120, description="post-editing starts per measurement")
    population_rows: int = Field(512, ge=1, le=5120,
                                 description="simulated-evolution starts (loop-indel rate) and de novo samples (length TV)")
    wild_types: int = Field(256, ge=2, le=5120,
                            description="fresh wild types of the mutation-effect Spearman (per family; paired SE ~0.003 at 256)")
    training_seeds: int = Field(1, ge=1, le=10,
                                description="training seeds per network for the scoring section (1: the shipped networks; "
                                "R >= 2 retrains R - 1 per network and family, ~1 CPU minute each)")
    seed_networks: list[Network] = Field(list(SCORED), min_length=1, max_length=5,
                                         description="networks retrained for --training-seeds; the gaps are those of the pairs listed")
    seed_families: list[FamilyName] = Field(["conserved-core", "mutation-bias"], min_length=1, max_length=2,
                                            description="toy families whose networks --training-seeds retrains")
    scoring_only: bool = Field(False, description="only the mutation-effect scoring section (both families), no sampling "
                               "measurements or PNG")
    quick: ClassVar[dict[str, Any]] = {"rows": 16, "population_rows": 32, "wild_types": 64}


# ----------------------------------------------------------------------------- what dplm_evo registers

TARGETS = {
    "EditSampler": declare.procedure(EditSamplerParams, cli=EditSamplerCli),
    "TrainDPLMEvo": declare.procedure(TrainDPLMEvoParams),
    "build_toy": declare.factory(ToyConfig),
    "build_dplm_150m": declare.factory(FullConfig),
    "from_dplm": declare.converter(),
    "mutation_spearman": declare.metric_check(MutationSpearmanParams),
    "oracle_mutation_spearman": declare.metric_check(OracleMutationSpearmanParams),
    "loop_indel_rate": declare.metric_check(LoopIndelRateParams),
    "de_novo_length_tv": declare.metric_check(DeNovoLengthTvParams),
    "post_edit_gain": declare.metric_check(PostEditGainParams),
    "spearman_margin": declare.metric_check(SpearmanMarginParams),
    "train_family": declare.trainer(FamilyTrainOptions),
    "benchmark:run": declare.benchmark(BenchOptions),
}
