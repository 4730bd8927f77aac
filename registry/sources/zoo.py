"""Source kind ``zoo``: a model role built by a registered factory (``@registry.contract.factory``) of an allowed
package, its ``config`` validated by the factory's params model, optionally loading weights (a local safetensors file
or one file of a hub repository, mapped to the factory's keys by a converter); conformance round-trips a hub file
through the converter's inverse."""
from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from ..calls import call_factory
from ..errors import BuildError, Skipped
from ..files import local_path
from ..schema import SHA256_RE, ConsentFree, DType, HubFile, Strict, Target
from ..weights import convert_state, hub_file, hub_file_cached, inverse_converter, read_state, save_state, sha256_file
from .base import (BuildRequest, LintRequest, LoadingPathRequest, SaveRequest, SourceKind, in_declared_dtype,
                   load_state_strict, place, register)

class ZooTiny(Strict):
    """The tiny loading-path check of a factory role whose weights are a hub file: factory config overrides."""

    config: ConsentFree = Field(
        description="factory config overrides (merged over the role's `config`) that give a tiny model with the same key "
        "layout and converter, e.g. fewer layers, a smaller width; validated like `config`"
    )


@register
class ZooSource(SourceKind):
    """A model role built by a registered factory (``@registry.contract.factory``) of an allowed
    package, optionally loading weights: a local file or one file of a hub repository, mapped to
    the factory's keys by ``convert``."""

    doc_example: ClassVar[str] = """
dit:   # the paper's checkpoint: paper-sized config, one hub file, a converter with its inverse
  source: zoo
  factory: "my_plugin.model:build_dit"
  config: {depth: 28, width: 1152}
  weights: {hub: owner/repo, revision: <40-hex>, filename: ckpt/model_ema.pt, sha256: <64-hex>}
  convert: "my_plugin.convert:from_upstream"
  tiny: {config: {depth: 2, width: 16}}   # the conformance loading-path check builds this instead
"""

    source: Literal["zoo"]
    factory: Target
    config: ConsentFree = Field({}, description="keyword arguments of the factory, validated against its params model")
    weights: str | HubFile | None = Field(
        None, description="a local .safetensors file relative to the spec file, or a hub file {hub, revision, filename, sha256} "
        "(.safetensors, or .pt/.pth/.ckpt read with torch.load(weights_only=True))"
    )
    sha256: str | None = Field(None, pattern=SHA256_RE)
    convert: Target | None = Field(
        None, description='"pkg.module:fn" registered as a converter: fn(state_dict) -> state_dict with the factory\'s keys'
    )
    dtype: DType | None = None
    allow_nonfinite: bool = Field(False, description="accept NaN/inf in the weights (refused by default)")
    tiny: ZooTiny | None = Field(
        None, description="hub-file weights only: `{config: {...}}`, factory config overrides (merged over `config`) that "
        "give a tiny model with the same key layout and converter; the conformance loading-path check builds the factory "
        "at this config, maps its state back by the converter's inverse and loads it through the real code, for any "
        "variant status (without it, a declared-only variant's hub-file check is SKIP); validated like `config`"
    )

    path_fields: ClassVar[tuple[str, ...]] = ("weights",)

    @model_validator(mode="after")
    def _hash(self) -> "ZooSource":
        if isinstance(self.weights, str):
            if self.sha256 is None:
                raise ValueError("sha256: local weights need their sha256")
            if not self.weights.endswith(".safetensors"):
                raise ValueError("weights: only .safetensors files may ship with a spec (a hub file, {hub, filename, ...}, "
                                 "may be .pt/.pth/.ckpt, read with torch.load(weights_only=True))")
        elif isinstance(self.weights, HubFile) and self.sha256 is not None:
            raise ValueError("sha256: a hub file carries its own sha256 (weights.sha256)")
        if self.convert is not None and self.weights is None:
            raise ValueError("convert: given without weights")
        if self.tiny is not None and not isinstance(self.weights, HubFile):
            raise ValueError("tiny: only a role whose weights are a hub file ({hub, filename, ...}) has a tiny "
                             "loading-path check (local weights are checked as shipped)")
        return self

    def tiny_factory_config(self) -> dict[str, Any]:
        """The factory config of the tiny loading-path check: ``config`` with ``tiny.config`` merged over it."""
        return {**self.config, **self.tiny_overrides()}

    def tiny_overrides(self) -> dict[str, Any]:
        """``tiny.config`` (``{}`` without a ``tiny:`` block)."""
        return dict(self.tiny.config) if self.tiny is not None else {}

    def build(self, req: BuildRequest) -> Any:
        """The factory called with its validated ``config``; weights read, verified, converted and loaded strictly;
        the transform; then placement."""
        obj = call_factory(self.factory, self.config, req.sub)
        if self.weights is not None:
            self._load_weights(obj, req)
        return place(req.transform(obj), req.device, req.dtype)

    def _load_weights(self, module: Any, req: BuildRequest) -> None:
        """A local safetensors file (inside the spec's folder unless the caller allows more) or a hub file, read
        safely (safetensors, or for a hub file torch.load(weights_only=True)), verified, converted, loaded strictly.
        ``req.hub_file_at``: a file standing in for the hub file (the conformance harness's own temp copy)."""
        assert self.weights is not None
        wloc = req.sub("weights")
        if isinstance(self.weights, str):
            path = local_path(self.weights, req.spec_dir, wloc, req.allow_outside_paths, "weights")
            if self.sha256 is None:
                raise BuildError("local weights need their sha256", req.sub("sha256"))
            state = read_state(path, self.sha256, wloc, req.sub("sha256"))
        else:  # a hub file carries its own sha256 (None only with allow_unpinned: true)
            path = req.hub_file_at if req.hub_file_at is not None else hub_file(self.weights, wloc)
            state = read_state(path, self.weights.sha256, wloc, torch_format=True)
        state = convert_state(state, self.convert, req.sub("convert") if self.convert else wloc)
        if module is None or not hasattr(module, "load_state_dict"):
            raise BuildError(f"factory returned {type(module).__name__}, which cannot take weights", wloc)
        module = in_declared_dtype(module, state, self.dtype)
        load_state_strict(module, state, path.name, wloc, self.allow_nonfinite)

    def missing_offline(self, spec_dir: Path) -> str | None:
        w = self.weights
        if isinstance(w, HubFile) and not hub_file_cached(w.hub, w.revision, w.filename, w.repo_type):
            return f"{w.hub}/{w.filename}"
        return None

    def local_files(self) -> dict[str, tuple[str, str | None]]:
        return {"weights": (self.weights, self.sha256)} if isinstance(self.weights, str) else {}

    def lint(self, req: LintRequest) -> None:
        entry = req.target(self.factory, f"{req.field}.factory", "factory")
        req.params(entry, self.config or {}, f"{req.field}.config")
        if self.tiny is not None:
            req.check_tiny(self, req.field, entry)  # tiny.config merged over config, as the loading-path check builds it
        req.target(self.convert, f"{req.field}.convert", "converter")

    def loading_path_check(self, req: LoadingPathRequest) -> Callable[[], None] | None:
        if not isinstance(self.weights, HubFile):
            return None  # local weights: the build check loads the shipped file

        def check() -> None:
            if self.tiny is None and req.declared_only is not None:
                # a declared-only role may be paper-sized (building it here would cost minutes)
                raise Skipped(
                    f"{req.declared_only}; its hub-file loading path is not built at the paper's size: add "
                    f"`tiny: {{config: {{...}}}}` to {req.field} (factory config overrides, merged over `config`, that give a "
                    f"tiny model with the same keys and converter, e.g. fewer layers, a smaller width) to check it offline")
            self._hub_file_round_trip(req)

        return check

    def _hub_file_round_trip(self, req: LoadingPathRequest) -> None:
        """A hub-file role's loading path, offline: the factory's random state dict (at ``config``, or at
        ``tiny.config`` merged over it when the role has one), mapped back by the converter's inverse
        (identity without a converter), saved under the same file name in a temp folder, then read,
        verified, converted and loaded by the same code as the real file.

        Every floating-point parameter is first moved off its init by seeded noise, so tensors the factory
        initialises identically (norm scales of ones, zero biases) are told apart: an inverse that swaps
        two of them fails. Every tensor must come back as saved, or, for one the converter fills itself
        (a release without it: new heads, norms), equal to the factory's own init."""
        import torch  # heavy library

        assert isinstance(self.weights, HubFile)
        sub = lambda name: req.locate(f"{req.field}.{name}")  # noqa: E731
        reference = call_factory(self.factory, self.config, sub, self.tiny.config if self.tiny is not None else None)
        init = {k: v.detach().clone() for k, v in reference.state_dict().items()}
        gen = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for param in reference.parameters():  # unique parameters: tied ones stay tied
                if param.is_floating_point():
                    param.add_(torch.randn(param.shape, generator=gen, dtype=torch.float32).to(param.device, param.dtype))
        state = {k: v.detach().clone() for k, v in reference.state_dict().items()}
        raw = inverse_converter(self.convert, sub("convert"))(state)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / self.weights.filename
            path.parent.mkdir(parents=True, exist_ok=True)
            save_state(raw, path)
            # dtype: None: the round trip checks the converter and key layout; a role's storage dtype
            # (bf16) would round the seeded noise and hide nothing about the layout
            local = self.model_copy(update={"weights": self.weights.model_copy(update={"sha256": sha256_file(path)}),
                                            "config": self.tiny_factory_config(), "tiny": None, "dtype": None})
            built = req.build_model(local, spec_dir=req.spec_dir, device="cpu", loc=req.loc,
                                    hub_file_at=path)  # the harness's own temp file, read as the hub file would be
        got = built.state_dict()

        def same(a: Any, b: Any) -> bool:
            return a.shape == b.shape and bool((a.to(b.dtype) == b).all())

        for k, v in state.items():
            if k not in got or not (same(got[k], v) or same(got[k], init[k])):
                raise AssertionError(f"{req.field}: {k} does not survive the save -> convert -> load round trip")

    def with_local_weights(self, path: str, sha256: str) -> "ZooSource":
        return self.model_copy(update={"weights": path, "sha256": sha256, "convert": None})

    def saved(self, req: SaveRequest) -> dict[str, Any]:
        out = req.write_state()
        if not out:  # nothing to save (an analytic model, a tokenizer object): the source rebuilds it as declared
            return self.model_dump(mode="json", exclude_defaults=True)
        head = {"source": "zoo", "factory": self.factory, **({"config": dict(self.config)} if self.config else {})}
        return {**head, **out, **({"allow_nonfinite": True} if self.allow_nonfinite else {}), **req.keep}
