"""Checks beyond the schema: code targets point into allowed packages, shipped weights exist and
match their sha256 (no import), and with ``resolve=True`` every target resolves to an object
registered for its kind (imports the allowed package's modules). Used by ``zoo validate``."""
from __future__ import annotations

from pathlib import Path

from .errors import ResolveError, SpecError
from .loader import locate, spec_roots, within
from .resolve import allowed_packages
from .spec import Spec, TimmSource, ZooSource


def lint(spec: Spec, file: str | Path, *, resolve: bool = False) -> list[SpecError]:
    file = str(file)
    try:
        allowed = allowed_packages()
    except ResolveError as exc:
        return [SpecError(exc.message, exc.location)]
    errors: list[SpecError] = []

    def target(value: str | None, field: str, kind: str) -> None:
        if value is None:
            return
        top = value.split(":")[0].split(".")[0]
        if top not in allowed:
            errors.append(SpecError(
                f"{value!r} is not allowed: package {top!r} is not in the allowlist ({', '.join(sorted(allowed))})",
                locate(file, field),
            ))
        elif resolve:
            from .resolve import resolve as resolve_target

            try:
                resolve_target(value, locate(file, field), kind=kind)
            except ResolveError as exc:
                errors.append(SpecError(exc.message, exc.location))

    top = spec.implementation.split(".")[0]
    if top not in allowed:
        errors.append(SpecError(f"package {top!r} is not in the allowlist", locate(file, "implementation")))
    for section in ("samplers", "recipes"):
        for name, proc in getattr(spec, section).items():
            target(proc.target, f"{section}.{name}.target", "procedure")
    for i, metric in enumerate(spec.metrics):
        target(metric.check, f"metrics.{i}.check", "metric_check")
    target(spec.bench, "bench", "benchmark")
    for role, model in spec.models.items():
        for variant, src in model.variants.items():
            field = f"models.{role}.variants.{variant}"
            if isinstance(src, ZooSource):
                target(src.factory, f"{field}.factory", "factory")
                target(src.convert, f"{field}.convert", "converter")
            target(getattr(src, "transform", None), f"{field}.transform", "transform")
            if isinstance(src, (ZooSource, TimmSource)) and isinstance(src.weights, str):
                from .build import sha256_file

                path = Path(file).parent / src.weights
                if not any(within(root, path) for root in spec_roots(file)):  # never hash files outside
                    errors.append(SpecError(f"weights file {path} is outside the spec's folder tree (ZOO_SPEC_ROOT allows more)",
                                            locate(file, f"{field}.weights")))
                elif not path.is_file():
                    errors.append(SpecError(f"weights file {path} does not exist", locate(file, f"{field}.weights")))
                elif src.sha256 is not None and sha256_file(path) != src.sha256:
                    errors.append(SpecError(
                        f"sha256 mismatch for {path.name}: file has {sha256_file(path)}", locate(file, f"{field}.sha256")
                    ))
    return errors
