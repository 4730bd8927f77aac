"""Source kind ``timm``: a model role created with ``timm.create_model`` (architecture keywords only), its weights
from a local safetensors file with its sha256; conformance loads the same architecture's random weights from a temp
file through the same code when the spec ships none."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from ..calls import one_line
from ..errors import BuildError, ParamError
from ..files import local_path
from ..hardware import offline
from ..hub import create_timm_model
from ..limits import SPEC_STR, TIMM_IMG_SIZE, TIMM_IN_CHANS, TIMM_NUM_CLASSES, check_tree
from ..schema import SHA256_RE, DType
from ..weights import read_state, sha256_file
from .base import (BuildRequest, LintRequest, LoadingPathRequest, SaveRequest, SourceKind, in_declared_dtype,
                   load_state_strict, place, register)
from .hub import built_from_tiny

#: ``pretrained_cfg``, ``cache_dir``) is refused.
TIMM_KWARGS = frozenset({"num_classes", "in_chans", "global_pool", "drop_rate", "drop_path_rate", "img_size"})


def _timm_size(key: str, value: Any) -> None:
    """The caps of one timm keyword (:mod:`registry.limits`): classes, channels, image sides, rates in [0, 1]."""
    caps = {"num_classes": TIMM_NUM_CLASSES, "in_chans": TIMM_IN_CHANS, "img_size": TIMM_IMG_SIZE}
    if key in caps:
        check_tree(value, f"kwargs.{key}", ints=caps[key])
    elif key in ("drop_rate", "drop_path_rate"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ValueError(f"kwargs.{key}: expected a rate in [0, 1], got {value!r}")
    else:
        check_tree(value, f"kwargs.{key}", strings=SPEC_STR)


@register
class TimmSource(SourceKind):
    """A model role created with ``timm.create_model``, architecture only; weights come from a local
    safetensors file with its sha256 (``pretrained: true`` downloads unpinned weights: it needs
    ``allow_unpinned: true`` and a network, and is refused offline)."""

    source: Literal["timm"]
    model_name: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$")
    pretrained: bool = False
    allow_unpinned: bool = False
    weights: str | None = Field(None, description="local safetensors file, relative to the spec file (needs sha256)")
    sha256: str | None = Field(None, pattern=SHA256_RE)
    kwargs: dict[str, Any] = Field({}, description=f"only {', '.join(sorted(TIMM_KWARGS))}; scalar values")
    dtype: DType | None = None
    allow_nonfinite: bool = Field(False, description="accept NaN/inf in the weights (refused by default)")

    path_fields: ClassVar[tuple[str, ...]] = ("weights", "model_name")

    @model_validator(mode="after")
    def _safe(self) -> "TimmSource":
        bad = sorted(set(self.kwargs) - TIMM_KWARGS)
        if bad:
            raise ValueError(f"kwargs: {', '.join(bad)} not allowed for timm (allowed: {', '.join(sorted(TIMM_KWARGS))})")
        for key, value in self.kwargs.items():
            ok = isinstance(value, (bool, int, float, str)) or (
                isinstance(value, list) and len(value) <= 4 and all(isinstance(v, int) for v in value))
            if not ok:
                raise ValueError(f"kwargs.{key}: expected a number, a string or a short list of ints, got {type(value).__name__}")
            _timm_size(key, value)
        if self.weights is not None:
            if self.sha256 is None:
                raise ValueError("sha256: local weights need their sha256")
            if not self.weights.endswith(".safetensors"):
                raise ValueError("weights: only .safetensors files may ship with a spec")
            if self.pretrained:
                raise ValueError("pretrained: give either pretrained: true or local weights, not both")
        if self.pretrained and not self.allow_unpinned:
            raise ValueError("pretrained: timm downloads unpinned weights; ship weights + sha256, or set allow_unpinned: true")
        return self

    def build(self, req: BuildRequest) -> Any:
        """``timm.create_model`` with architecture kwargs only; local weights through the same strict safetensors
        loader as zoo factories; ``pretrained: true`` refused offline (it downloads). Placed, then transformed."""
        bad = sorted(k for k in self.kwargs if k not in TIMM_KWARGS or k in _TIMM_FORBIDDEN)
        if bad:
            raise ParamError(f"timm kwargs {', '.join(bad)} are not allowed (allowed: {', '.join(sorted(TIMM_KWARGS))})", req.sub("kwargs"))
        if self.pretrained and offline():
            raise BuildError(f"timm pretrained weights for {self.model_name!r} must be downloaded, but HF_HUB_OFFLINE is set; "
                             "ship local weights with their sha256 instead", req.sub("pretrained"))
        try:
            model = create_timm_model(self.model_name, pretrained=self.pretrained, **self.kwargs)
        except Exception as exc:  # noqa: BLE001 - timm raises many types; report one line
            raise BuildError(f"timm could not create {self.model_name!r}: {one_line(exc)}", req.loc) from None
        if self.weights is not None:
            path = local_path(self.weights, req.spec_dir, req.sub("weights"), req.allow_outside_paths, "weights")
            if self.sha256 is None:
                raise BuildError("local weights need their sha256", req.sub("sha256"))
            state = read_state(path, self.sha256, req.sub("weights"), req.sub("sha256"))
            load_state_strict(in_declared_dtype(model, state, self.dtype), state, path.name, req.sub("weights"), self.allow_nonfinite)
        return req.transform(place(model, req.device, req.dtype))

    def missing_offline(self, spec_dir: Path) -> str | None:
        if self.pretrained and self.weights is None:
            return f"timm pretrained weights of {self.model_name}"
        return None

    def local_files(self) -> dict[str, tuple[str, str | None]]:
        return {"weights": (self.weights, self.sha256)} if self.weights is not None else {}

    def lint(self, req: LintRequest) -> None:
        known = req.library_has("timm", self.model_name)
        if known is not None and not known[0]:
            hint = f"; did you mean {known[1][0]!r}?" if known[1] else ""
            req.problem(f"{req.field}.model_name", f"timm has no model {self.model_name!r}{hint}")

    def loading_path_check(self, req: LoadingPathRequest) -> Callable[[], None] | None:
        if self.weights is not None:
            return None  # shipped weights: the build check loads them
        return lambda: built_from_tiny(self, req)

    def tiny_checkpoint(self, workdir: Path) -> "TimmSource":
        """The same architecture's random weights saved as a local safetensors file, and this source reading it."""
        from safetensors.torch import save_file  # heavy library

        model = create_timm_model(self.model_name, pretrained=False, **self.kwargs)
        path = workdir / "tiny.safetensors"
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
        return self.model_copy(update={"weights": str(path), "sha256": sha256_file(path)})

    def saved(self, req: SaveRequest) -> dict[str, Any]:
        out = req.write_state()
        if not out:  # nothing to save (no tensors): the source rebuilds it as declared
            return self.model_dump(mode="json", exclude_defaults=True)
        head = {"source": "timm", "model_name": self.model_name, **({"kwargs": dict(self.kwargs)} if self.kwargs else {})}
        return {**head, **out, **({"allow_nonfinite": True} if self.allow_nonfinite else {}), **req.keep}


#: timm keyword arguments that never reach ``create_model`` from a spec, whatever the schema says.
_TIMM_FORBIDDEN = ("checkpoint_path", "pretrained_cfg", "pretrained_cfg_overlay", "cache_dir")
