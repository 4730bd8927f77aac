"""Building: every CPU variant builds (a non-runnable one is SKIP with its status, never PASS), and every
hub-loaded role (usually the paper's ``full`` checkpoints) is loaded through the same builder from a tiny checkpoint
saved locally (``save_pretrained``; a hub *file* role: the factory's random state dict through the converter's
inverse), so the loading path is tested with no network."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..build import build_model
from ..loader import locate
from ..sources import LoadingPathRequest, tiny_tokenizer  # noqa: F401 - tiny_tokenizer re-exported
from .base import Check, Skipped, SpecUnderCheck, family


@family
def builds_and_loading_paths(s: SpecUnderCheck) -> list[Check]:
    spec, file, entry = s.spec, s.file, s.entry
    checks: list[Check] = []
    for v in s.cpu:

        def builds(v: str = v) -> None:
            refusal = spec.hardware[v].refusal(v)
            if refusal:
                raise Skipped(refusal)
            s.pipeline(v)

        checks.append(s.check(f"builds[{v}]", builds))

    for role, model in spec.models.items():
        for v, src in model.variants.items():
            field = f"models.{role}.variants.{v}"
            status = spec.hardware[v]
            body = src.loading_path_check(LoadingPathRequest(
                role=role, variant=v, field=field, spec_dir=entry.path.parent, loc=locate(file, field),
                declared_only=str(status.refusal(v)) if status.status == "declared-only" else None,
                allow_remote_code_stub=s.allow_remote_code_stub, build_model=build_model,
                locate=lambda f: locate(file, f)))
            if body is not None:
                checks.append(s.check(f"loading-path[{role}.{v}]", body))
    return checks


# ----------------------------------------------------------------------------- tiny checkpoints
def _tiny_checkpoint(source: Any, workdir: Path) -> Any:
    """Save a tiny model of the same type locally and return the source pointing at it (the kind's own
    ``tiny_checkpoint``: transformers/diffusers from ``tiny.config``, timm random weights)."""
    return source.tiny_checkpoint(workdir)
