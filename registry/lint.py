"""Checks beyond the schema: code targets point into allowed packages, shipped weights exist and
match their sha256 (no import), every target is registered for its kind, procedure ``params`` /
``params_by_variant`` and factory ``config`` match the implementation's models, and ``model_class``
names a public class of transformers/diffusers. Used by ``zoo validate``.

Targets are looked up in the torch-free params module their package ships (:mod:`registry.declare`), and their
params are validated by pydantic with those very models through the build's own functions
(:mod:`registry.calls`), so validating the built-in specs imports neither method code nor torch. For a package
without a params module, ``resolve=True`` (what ``zoo validate`` passes) imports the target and validates with
the imported object's models: a plugin is checked as strictly either way."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .calls import factory_config, procedure_params, validated_kwargs
from .contract import FactoryParams, ProcedureParams
from .declare import runtime_models
from .errors import ParamError, ResolveError, SpecError
from .loader import locate, origin_dir, source_dir, spec_roots, within
from .resolve import allowed_packages
from .resolve import resolve as resolve_target
from .sources import LintRequest
from .spec import Spec
from .static import Info, target_info
from .static import library_has as static_library_has


def lint(spec: Spec, file: str | Path, *, resolve: bool = False) -> list[SpecError]:
    file = str(file)
    try:
        allowed = allowed_packages()
    except ResolveError as exc:
        return [SpecError(exc.message, exc.location)]
    errors: list[SpecError] = []

    def target(value: str | None, field: str, kind: str) -> Info | None:
        """Check one target; its static description (params models) when its package has a params module."""
        if value is None:
            return None
        top = value.split(":")[0].split(".")[0]
        if top not in allowed:
            errors.append(SpecError(
                f"{value!r} is not allowed: package {top!r} is not in the allowlist ({', '.join(sorted(allowed))})",
                locate(file, field),
            ))
            return None
        info = target_info(value)
        if info is not None:
            if info.error:
                errors.append(SpecError(f"{value!r}: {info.file} cannot be imported: {info.error}", locate(file, field)))
                return None
            if info.kinds is None or kind not in info.kinds:
                what = f"a {', '.join(info.kinds)}" if info.kinds else "not declared"
                errors.append(SpecError(
                    f"{value!r} is not registered as a {kind.replace('_', ' ')} ({what} per {info.file})", locate(file, field)))
                return None
            return info
        if resolve:  # no params module: the imported object's own models, validated the same way
            try:
                obj = resolve_target(value, locate(file, field), kind=kind)
            except ResolveError as exc:
                errors.append(SpecError(exc.message, exc.location))
                return None
            params_model, cli = runtime_models(obj, kind)
            return Info((kind,), params_model, cli, f"{value} (imported: its package has no params module)")
        return None

    def located(run: Any) -> None:
        """Run one validation the build runs too; its ParamError becomes a located SpecError."""
        try:
            run()
        except ParamError as exc:
            errors.append(SpecError(exc.message, exc.location))

    def at(field: str) -> Any:
        return lambda f: locate(file, f"{field}.{f}" if f else field)

    def params(entry: Info | None, values: dict, field: str) -> None:
        """``values`` (a factory's ``config``, a trainer's params) through the build's own validation."""
        if entry is None or not isinstance(values, dict):
            return
        model = entry.params or FactoryParams
        located(lambda: validated_kwargs(model, values, lambda f: locate(file, f), field))

    def procedure(entry: Info | None, proc: Any, section: str, name: str) -> None:
        """A procedure's ``params``, and ``params`` merged with each ``params_by_variant``, as the build validates them
        (:func:`registry.calls.procedure_params`); a key is located where the spec writes it."""
        if entry is None:
            return
        model = entry.params or ProcedureParams
        base = f"{section}.{name}.params"
        located(lambda: procedure_params(model, proc.params, {}, at(base), name))
        for v, values in proc.params_by_variant.items():
            over = f"{section}.{name}.params_by_variant.{v}"
            where = lambda f, over=over: locate(file, f"{over}.{f}" if f.split(".")[0] in values else f"{base}.{f}" if f else over)  # noqa: E731
            located(lambda where=where, values=values: procedure_params(model, {**proc.params, **values}, {}, where, name))

    def call_params(value: str | None, values: dict, field: str, kind: str) -> None:
        """``check_params`` / ``transform_config`` through the callable's params model, as the build validates them."""
        entry = target(value, field.rsplit(".", 1)[0] + (".check" if kind == "metric_check" else ".transform"), kind)
        prefix, _, last = field.rpartition(".")
        if entry is not None:
            located(lambda: validated_kwargs(entry.params or FactoryParams, values, at(prefix), last))

    def check_tiny(src: Any, field: str, entry: Info | None = None) -> None:
        """``tiny.config`` merged over ``config``, through the factory's params model, as the conformance
        loading-path check will build it."""
        if entry is not None:
            where = lambda name: locate(file, f"{field}.{name}")  # noqa: E731
            located(lambda: factory_config(entry.params or FactoryParams, src.config, where, src.tiny_overrides()))

    top = spec.implementation.split(".")[0]
    if top not in allowed:
        errors.append(SpecError(f"package {top!r} is not in the allowlist", locate(file, "implementation")))
    for section in ("samplers", "recipes"):
        for name, proc in getattr(spec, section).items():
            procedure(target(proc.target, f"{section}.{name}.target", "procedure"), proc, section, name)
    for i, metric in enumerate(spec.metrics):
        call_params(metric.check, metric.check_params, f"metrics.{i}.check_params", "metric_check")
    target(spec.bench, "bench", "benchmark")
    if spec.docs:
        from .cards import card_path

        card, why = card_path(file, spec.docs, origin_dir(file, ("docs",), Path(file).parent))  # a parent's: its folder
        if card is None:
            errors.append(SpecError(why, locate(file, "docs")))
    for tname, entry in spec.training.items():
        params(target(entry.trainer, f"training.{tname}.trainer", "trainer"), entry.params, f"training.{tname}.params")
    def library_has(library: str, name: str) -> Any:
        return static_library_has(library, name)

    def local_file(field: str, sha_field: str, base: Path, rel: str, sha256: str | None, what: str) -> None:
        """A file the spec ships: inside its tree (never hash files outside), present, hashing as declared."""
        from .weights import sha256_file

        path = base / rel
        if not any(within(root, path) for root in (*spec_roots(file), base.resolve())):
            errors.append(SpecError(f"{what} {path} is outside the spec's folder tree (ZOO_SPEC_ROOT allows more)",
                                    locate(file, field)))
        elif not path.is_file():
            errors.append(SpecError(f"{what} {path} does not exist", locate(file, field)))
        elif sha256 is not None and sha256_file(path) != sha256:
            errors.append(SpecError(f"sha256 mismatch for {path.name}: file has {sha256_file(path)}",
                                    locate(file, sha_field)))

    for role, model in spec.models.items():
        for variant, src in model.variants.items():
            field = f"models.{role}.variants.{variant}"
            src.lint(LintRequest(field=field, role=role, variant=variant, resolve=resolve,
                                 problem=lambda at, msg: errors.append(SpecError(msg, locate(file, at))),
                                 target=target, params=params, library_has=library_has,
                                 foreign_problem=foreign_role_problem, check_tiny=check_tiny))
            tcfg = {**src.transform_config,  # a {file:, sha256:} value reaches the transform as a path
                    **{key: ref.file for key, ref in src.config_files().items()}}
            call_params(src.transform, tcfg, f"{field}.transform_config", "transform")
            for key, ref in src.config_files().items():
                path = ("models", role, "variants", variant, "transform_config", key, "file")
                local_file(".".join(path[:-1]), ".".join(path[:-1]) + ".sha256", origin_dir(file, path, Path(file).parent), ref.file,
                           ref.sha256, "file")
            base = source_dir(file, role, variant, Path(file).parent)  # inherited: the parent's folder
            for fname, (rel, sha) in src.local_files().items():
                local_file(f"{field}.{fname}", f"{field}.sha256", base, rel, sha, f"{fname} file")
    return errors


def foreign_role_problem(src: Any, variant: str) -> str | None:
    """Why a ``from_spec`` role cannot be built (no such catalogued spec, no such role or variant), or None;
    reads the named spec's YAML only (no validation of it, no import)."""
    from .errors import SpecError as _SpecError
    from .loader import find_spec_by_name, read_document

    assert src.from_spec is not None
    path = find_spec_by_name(src.from_spec)
    if path is None:
        return f"no spec named {src.from_spec!r} in the catalog (built-ins, zoo.specs plugins, ZOO_SPECS_PATH)"
    try:
        data = read_document(path, warn=False).data  # another spec: its own load warns about its spellings
    except _SpecError as exc:
        return f"spec {src.from_spec!r} cannot be read: {exc}"
    v = src.from_variant or variant
    role = ((data or {}).get("models") or {}).get(src.from_role) if isinstance(data, dict) else None
    if not isinstance(role, dict) or v not in (role.get("variants") or {}):
        return f"spec {src.from_spec!r} has no role {src.from_role!r} with a {v} variant"
    return None
