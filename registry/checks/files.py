"""The spec file and the files it ships: it validates (schema, lint: targets, params, weights, cards), its
``requires`` hold, and every shipped file (``weights:`` and ``{file:, sha256:}`` transform-config values) exists
and matches the sha256 the spec declares."""
from __future__ import annotations

from typing import Any

from .base import Check, Skipped, SpecUnderCheck, family


@family
def spec_and_files(s: SpecUnderCheck) -> list[Check]:
    spec, file, missing = s.spec, s.file, s.missing

    def validates() -> None:
        from ..lint import lint

        problems = lint(spec, file, resolve=not missing)  # never import code whose requirements are missing
        assert not problems, "; ".join(str(p) for p in problems)

    def requires() -> None:
        from ..build import check_requires

        if missing:
            raise Skipped(missing)
        check_requires(spec, file)

    checks = [s.check("validates", validates), s.check("requires", requires)]
    from ..context import declared_files

    for declared in declared_files(spec, file).values():
        parts = declared.field.split(".")  # models.<role>.variants.<v>.weights | ...transform_config.<key>
        label = f"{parts[1]}.{parts[3]}" + (f".{parts[-1]}" if parts[4] == "transform_config" else "")
        kind = "weights" if parts[4] == "weights" else "file"

        def shipped(declared: Any = declared) -> None:
            from ..build import sha256_file

            assert declared.path.is_file(), f"{declared.path} is missing"
            actual = sha256_file(declared.path)
            assert actual == declared.sha256, f"{declared.path.name}: sha256 {actual} != spec {declared.sha256}"

        checks.append(s.check(f"{kind}[{label}]", shipped))
    return checks
