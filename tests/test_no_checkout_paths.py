"""Method and engine code find their files through the hook context, never through the checkout: no
``Path(__file__).parents[N]`` in ``zoo/`` or ``registry/``, and no sha256 a spec declares copied into Python
(a copy drifts from the spec, and from a wheel the path points nowhere)."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHA = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")


def parents_indexing(roots: list[Path]) -> list[str]:
    """``file:line`` of every ``parents[`` in the Python and template files under ``roots``."""
    hits = []
    for root in roots:
        for f in sorted(root.rglob("*")):
            if f.suffix not in (".py", ".tmpl") or "__pycache__" in f.parts:
                continue
            for i, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
                if "parents[" in line:
                    hits.append(f"{f.relative_to(root.parent)}:{i}")
    return hits


def copied_digests(spec_dirs: list[Path], code_roots: list[Path]) -> list[str]:
    """``file:line: sha`` for every 64-hex digest a spec declares that also appears in Python under ``code_roots``."""
    declared = {m for d in spec_dirs for f in d.glob("*.yaml") for m in SHA.findall(f.read_text())}
    hits = []
    for root in code_roots:
        for f in sorted(root.rglob("*.py")):
            if ".venv" in f.parts or "__pycache__" in f.parts:
                continue
            for i, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
                hits += [f"{f}:{i}: {m[:12]}…" for m in SHA.findall(line) if m in declared]
    return hits


def test_no_path_into_the_checkout_in_engine_or_method_code() -> None:
    assert parents_indexing([REPO / "zoo", REPO / "registry"]) == []


def test_no_spec_digest_is_copied_into_python() -> None:
    roots = [REPO / d for d in ("zoo", "registry", "tools", "tests")]
    assert copied_digests([REPO / "specs"], roots) == []


def test_the_scans_catch_planted_copies(tmp_path: Path) -> None:
    """Negative control: a planted checkout path and a planted copy of a spec's sha256 are both found."""
    digest = "ab" * 32
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "m.yaml").write_text(f"models: {{x: {{sha256: {digest}}}}}\n")
    (tmp_path / "zoo" / "methods" / "m").mkdir(parents=True)
    planted = tmp_path / "zoo" / "methods" / "m" / "core.py"
    planted.write_text(f'W = Path(__file__).resolve().parents[3] / "specs"\nSHA = "{digest}"\nOTHER = "{"cd" * 32}"\n')
    assert parents_indexing([tmp_path / "zoo"]) == ["zoo/methods/m/core.py:1"]
    assert copied_digests([tmp_path / "specs"], [tmp_path / "zoo"]) == [f"{planted}:2: {digest[:12]}…"]
