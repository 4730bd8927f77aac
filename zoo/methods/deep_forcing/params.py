"""The torch-free params module of the ``deep_forcing`` method: the models its specs fill, read by ``zoo validate``
without importing torch (see :mod:`registry.declare`); the implementation modules import these very classes."""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from registry import declare
from registry.contract import CliInputs, CliInputs as BaseCliInputs, FactoryParams, Options, ProcedureParams
from registry.limits import Frames, Rows
from zoo.common.out_files import OutPath


GRID = (2, 2)
CHANNELS = 8
SIGMA = 0.2
TRAIN_FRAMES = 21
CHUNK = 3


class CachePolicy(BaseModel):
    """One cache policy (all sizes in frames; ``frame_tokens`` tokens per frame).

    ``window_frames`` ``M`` (None: the no-eviction full cache), ``sink_frames`` ``S``, ``budget_frames`` ``N``,
    ``recent_frames`` ``R``; PC keeps ``C = N - S - R`` frames' worth of tokens chosen token-wise. Constraints
    (note §7.9 plus two of ours that keep every batch row the same length): ``S + R <= N <= M``, ``S < M``,
    ``R >= chunk_frames`` (the new chunk is always recent, so it is never a candidate) and, with PC on,
    ``C <= M - N + 1`` (then at least ``C`` never-selected candidates exist at every compression, so the
    re-use cap never shrinks the selection)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    frame_tokens: int = Field(4, ge=1, le=100_000, description="tokens per latent frame (1560 for Wan2.1 at 480x832)")
    chunk_frames: int = Field(3, ge=1, le=64, description="frames generated per AR step")
    window_frames: int | None = Field(21, ge=1, le=10_000, description="M: attention window incl. the current chunk; null = never evict")
    sink_frames: int = Field(10, ge=0, le=10_000, description="S: first frames kept for ever (0 = none)")
    budget_frames: int = Field(16, ge=1, le=10_000, description="N: frames' worth of tokens kept by a PC compression")
    recent_frames: int = Field(4, ge=1, le=10_000, description="R: last frames always kept by PC (their queries score the candidates)")
    fusion: Literal["sum", "max"] = Field("sum", description="sum over recent queries (paper Eq. 7) or max (code option)")
    topc_max_reuse: int | None = Field(7, ge=1, le=1_000_000, description="code option: a token selected this many times becomes ineligible; null = no cap")
    rope_realign: bool = Field(True, description="re-rotate sink (and top-C) temporal RoPE phases to sit before the tail")
    pc_enabled: bool = Field(True, description="Participative Compression on (off: FIFO eviction of the non-sink tail)")

    @model_validator(mode="after")
    def _sizes(self) -> "CachePolicy":
        M = self.window_frames
        if M is None:
            if self.pc_enabled:
                raise ValueError("pc_enabled: the full cache (window_frames: null) never compresses; set pc_enabled: false")
            return self
        if self.sink_frames >= M:
            raise ValueError(f"sink_frames: expected S < M = {M}, got {self.sink_frames}")
        if self.chunk_frames > M - self.sink_frames:
            raise ValueError(f"chunk_frames: a chunk of {self.chunk_frames} does not fit beside {self.sink_frames} sinks in M = {M}")
        if self.pc_enabled:
            S, N, R = self.sink_frames, self.budget_frames, self.recent_frames
            if not S + R <= N <= M:
                raise ValueError(f"budget_frames: expected S + R <= N <= M, got S={S}, R={R}, N={N}, M={M}")
            if R < self.chunk_frames:
                raise ValueError(f"recent_frames: expected R >= chunk_frames = {self.chunk_frames}, got {R}")
            if N - S - R > M - N + 1:
                raise ValueError(f"budget_frames: expected C = N - S - R <= M - N + 1 = {M - N + 1}, got C = {N - S - R}")
        return self

    @property
    def top_frames(self) -> int:
        """C in frames (0 with PC off)."""
        return self.budget_frames - self.sink_frames - self.recent_frames if self.pc_enabled else 0


class PolicyParams(ProcedureParams):
    """The cache-policy fields every Deep Forcing sampler shares (frames; see :class:`~.policy.CachePolicy`)."""

    window_frames: int | None = Field(21, ge=1, le=10_000, description="M incl. the current chunk; null = the full cache")
    sink_frames: int = Field(10, ge=0, le=10_000, description="S")
    budget_frames: int = Field(16, ge=1, le=10_000, description="N (PC)")
    recent_frames: int = Field(4, ge=1, le=10_000, description="R (PC)")
    fusion: str = Field("sum", pattern="^(sum|max)$", description="PC score fusion over recent queries")
    topc_max_reuse: int | None = Field(7, ge=1, le=1_000_000, description="public-code re-use cap (null: none)")
    rope_realign: bool = True
    pc_enabled: bool = True

    def policy_kwargs(self) -> dict[str, Any]:
        """The policy fields as :class:`~.policy.CachePolicy` keyword arguments (without frame/chunk sizes)."""
        return {k: getattr(self, k) for k in PolicyParams.model_fields}


class DeepForcingRolloutParams(PolicyParams):
    role: str = Field("video", description="the toy chunk transformer role")
    num_frames: int = Field(126, ge=6, le=3000, description="total frames incl. the prompt (126 = 6x, 252 = 12x the 21-frame training clips)")
    prompt_frames: int = Field(3, ge=3, le=21, description="ground-truth frames given first (a multiple of 3)")
    batch_size: int = Field(8, ge=1, le=4096, description="clips drawn when no prompt is given")

    @model_validator(mode="after")
    def _policy(self) -> "DeepForcingRolloutParams":
        self.policy()
        if self.prompt_frames % CHUNK or self.num_frames % CHUNK or self.num_frames <= self.prompt_frames:
            raise ValueError(f"num_frames/prompt_frames: expected multiples of {CHUNK} with num_frames > prompt_frames")
        return self

    def policy(self) -> CachePolicy:
        return CachePolicy(frame_tokens=GRID[0] * GRID[1], chunk_frames=CHUNK, **self.policy_kwargs())


class DeepForcingRolloutCli(CliInputs):
    frames: Frames | None = Field(None, description="total frames incl. the prompt, a multiple of 3 (default: the spec's num_frames)")
    n: Rows = Field(8, description="clips to roll out")
    out: OutPath | None = Field(None, description="PNG: identity drift and motion energy per frame (.png added when missing)")


EXAMPLE_PROMPT = "a red fox walks through fresh snow in a quiet forest, cinematic, soft morning light"


class WanDeepForcingSamplerParams(PolicyParams):
    num_frames: int = Field(126, ge=1, le=960, description="latent frames (a multiple of chunk_frames); 126 ~ 31 s at 16 fps, the paper's 30-s setting")
    height: int = Field(480, ge=2, le=2048, description="pixels (a multiple of the VAE factor x patch, 16 for Wan2.1)")
    width: int = Field(832, ge=2, le=2048, description="pixels (a multiple of the VAE factor x patch, 16 for Wan2.1)")
    steps: tuple[Annotated[int, Field(gt=0, le=1000)], ...] = Field((1000, 750, 500, 250), min_length=1, max_length=50,
                                   description="Self-Forcing's denoising steps (strictly decreasing, in (0, 1000])")
    shift: float = Field(5.0, gt=0.0, le=100.0, description="timestep shift sigma = s t / (1 + (s - 1) t)")
    chunk_frames: int = Field(3, ge=1, le=21, description="latent frames per chunk")
    max_sequence_length: int = Field(512, ge=1, le=512, description="UMT5 tokens (padded; Wan's text_len)")
    progress: bool = Field(False, description="tqdm bar over chunks")

    @field_validator("steps")
    @classmethod
    def _steps(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if any(not 0 < t <= 1000 for t in v) or any(a <= b for a, b in zip(v, v[1:])):
            raise ValueError(f"expected strictly decreasing timesteps in (0, 1000], got {list(v)}")
        return v

    @model_validator(mode="after")
    def _policy(self) -> "WanDeepForcingSamplerParams":
        CachePolicy(frame_tokens=1, chunk_frames=self.chunk_frames, **self.policy_kwargs())
        if self.num_frames % self.chunk_frames:
            raise ValueError(f"num_frames: expected a multiple of chunk_frames = {self.chunk_frames}, got {self.num_frames}")
        return self


class WanDeepForcingSamplerCli(BaseCliInputs):
    prompt: str = Field(EXAMPLE_PROMPT, max_length=10_000)
    num_frames: int | None = Field(None, ge=1, le=960, description="latent frames (default: the sampler's num_frames)")
    out: OutPath = "deep-forcing-video.png"


class ToyTrainOptions(Options):
    """The shipped toy's recipe: teacher-forced next-chunk MSE, AdamW + one-cycle (weight decay 0.01), clipping 1.0."""

    steps: int = Field(800, ge=1, le=100_000)
    batch: int = Field(32, ge=1, le=4096)
    lr: float = Field(2e-3, gt=0, le=1.0)


class BenchOptions(Options):
    batch: int = Field(32, ge=2, le=1024, description="clips per policy (paired across policies)")
    quick: ClassVar[dict[str, Any]] = {"batch": 16}


# ----------------------------------------------------------------------------- factories, transform, metric checks


class BuildToyVideoConfig(FactoryParams):
    d: Annotated[int, Field(ge=8, le=1024)] = 64
    heads: Annotated[int, Field(ge=1, le=64)] = 4
    layers: Annotated[int, Field(ge=1, le=16)] = 2
    ff: Annotated[int, Field(ge=8, le=8192)] = 128


class BuildWanTransformerConfig(FactoryParams):
    num_layers: Annotated[int, Field(ge=1, le=64)] = 30
    num_attention_heads: Annotated[int, Field(ge=1, le=64)] = 12
    attention_head_dim: Annotated[int, Field(ge=6, le=256)] = 128
    ffn_dim: Annotated[int, Field(ge=8, le=32768)] = 8960
    in_channels: Annotated[int, Field(ge=1, le=64)] = 16
    text_dim: Annotated[int, Field(ge=8, le=8192)] = 4096
    freq_dim: Annotated[int, Field(ge=8, le=1024)] = 256


class InstallDeepForcingParams(FactoryParams):
    window_frames: int | None = 21
    sink_frames: int = 10
    budget_frames: int = 16
    recent_frames: int = 4
    fusion: str = "sum"
    topc_max_reuse: int | None = 7
    rope_realign: bool = True
    pc_enabled: bool = True
    chunk_frames: int = 3
    theta: float = 10000.0


class DriftAtParams(FactoryParams):
    sampler: str
    frames: int = 252
    batch: int = 32


class MotionAtParams(FactoryParams):
    sampler: str
    frames: int = 252
    batch: int = 32


class DsBeatsFifoParams(FactoryParams):
    frames: int = 252
    batch: int = 32
    sink: str = "deep-sink"
    fifo: str = "fifo"


TARGETS = {
    "DeepForcingRollout": declare.procedure(DeepForcingRolloutParams, cli=DeepForcingRolloutCli),
    "WanDeepForcingSampler": declare.procedure(WanDeepForcingSamplerParams, cli=WanDeepForcingSamplerCli),
    "build_toy_video": declare.factory(BuildToyVideoConfig),
    "build_wan_transformer": declare.factory(BuildWanTransformerConfig),
    "install_deep_forcing": declare.transform(InstallDeepForcingParams),
    "from_self_forcing": declare.converter(),
    "train_toy": declare.trainer(ToyTrainOptions),
    "benchmark:run": declare.benchmark(BenchOptions),
    "drift_at": declare.metric_check(DriftAtParams),
    "motion_at": declare.metric_check(MotionAtParams),
    "ds_beats_fifo": declare.metric_check(DsBeatsFifoParams),
}
