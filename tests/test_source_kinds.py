"""Model source kinds are one module each under ``registry/sources/`` and the engine dispatches to them: a kind added
from outside (here, in a test: a schema and a build, a few lines) validates, builds and passes ``zoo check`` with no
edit elsewhere in the engine; outside ``registry/sources/`` no engine module branches on a kind."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml

from registry.schema import ConsentFree, Target
from registry.sources import BuildRequest, SourceKind, kinds, register, unregister

REPO = Path(__file__).resolve().parents[1]


class AliasSource(SourceKind):
    """A toy kind: a registered factory under another tag (the schema fragment and build are all it needs)."""

    source: Literal["toy-alias"]
    factory: Target
    config: ConsentFree = {}

    def build(self, req: BuildRequest) -> Any:
        from registry.calls import call_factory

        return req.transform(call_factory(self.factory, self.config, req.sub))


@pytest.fixture
def alias_kind():
    register(AliasSource)
    try:
        yield AliasSource
    finally:
        unregister(AliasSource)


def _user_spec(folder: Path, name: str = "my-alias-ddim") -> Path:
    data = yaml.safe_load((REPO / "specs" / "f-dpmsolver.yaml").read_text())
    toy = data["models"]["denoiser"]["variants"]["toy"]
    mine = {
        "name": name,
        "title": "F-DDIM on the toy mixture, its denoiser from a kind registered by a plugin",
        "task": data["task"],
        "implementation": data["implementation"],
        "models": {"denoiser": {"kind": "vp-diffusion-model",
                                "variants": {"toy": {"source": "toy-alias", "factory": toy["factory"], "config": toy["config"]}}}},
        "samplers": {"f-ddim": {"target": data["samplers"][data["default"]]["target"], "params": {"num_inference_steps": 8}}},
        "default": "f-ddim",
        "variants": ["toy"],
        "hardware": {"toy": data["hardware"]["toy"]},
        "invariants": data["invariants"][:2],
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(mine, sort_keys=False))
    return path


def test_a_kind_added_from_outside_validates_builds_and_passes_zoo_check(tmp_path: Path, alias_kind, capsys) -> None:
    import zoo
    from registry.conformance import run_checks
    from registry.lint import lint
    from registry.loader import load_spec_file

    path = _user_spec(tmp_path / "specs")
    spec = load_spec_file(path)
    assert type(spec.models["denoiser"].variants["toy"]) is AliasSource
    assert lint(spec, path, resolve=True) == []
    assert zoo.add_specs(path.parent) == ["my-alias-ddim"]
    pipe = zoo.load("my-alias-ddim")
    x = pipe(seed=0, batch_size=3).samples
    assert x.shape[0] == 3 and bool(x.isfinite().all())
    capsys.readouterr()
    assert run_checks([zoo.entry("my-alias-ddim")], verbose=True)
    out = capsys.readouterr().out
    assert "0 failed" in out and "PASS  my-alias-ddim::builds[toy]" in out and "PASS  my-alias-ddim::invariant[point-mass-exact]" in out


def test_an_unregistered_kind_is_a_located_one_line_error(tmp_path: Path) -> None:
    from registry.errors import SpecErrors
    from registry.loader import load_spec_file

    assert "toy-alias" not in {t for k in kinds() for t in k.tags()}
    path = _user_spec(tmp_path / "specs", "my-alias-gone")
    with pytest.raises(SpecErrors) as err:
        load_spec_file(path)
    line = str(err.value).splitlines()[0]
    assert str(path) in line and "models.denoiser.variants.toy" in line and "toy-alias" in line
    assert "'zoo'" in line and "'role'" in line  # the registered tags are named


def test_built_in_kinds_keep_their_order_and_a_taken_tag_is_refused() -> None:
    assert [t for k in kinds() for t in k.tags()] == ["transformers", "diffusers", "timm", "zoo", "role"]

    class Clash(SourceKind):
        source: Literal["zoo"]

    with pytest.raises(ValueError, match="already registered"):
        register(Clash)
    with pytest.raises(TypeError, match="Literal"):
        register(type("NoTag", (SourceKind,), {"__annotations__": {"source": str}}))


#: ``isinstance(x, <a source class>)`` in engine code: a branch on the kind instead of a call to it.
BRANCH = re.compile(r"isinstance\([^)]*\b(?:HubSource|TimmSource|ZooSource|RoleSource|SourceKind|[A-Z]\w*Source)\b")


def kind_branches(root: Path) -> list[str]:
    """``file:line`` of every engine line outside ``registry/sources/`` that branches on a source kind."""
    out = []
    for p in sorted(root.rglob("*.py")):
        if "sources" in p.relative_to(root).parts:
            continue
        for i, line in enumerate(p.read_text().splitlines(), 1):
            if BRANCH.search(line):
                out.append(f"{p.relative_to(root.parent)}:{i}")
    return out


def test_no_engine_module_branches_on_a_source_kind(tmp_path: Path) -> None:
    assert kind_branches(REPO / "registry") == []
    planted = tmp_path / "registry"
    (planted / "sources").mkdir(parents=True)
    (planted / "sources" / "zoo.py").write_text("ok = isinstance(src, ZooSource)\n")  # inside sources/: allowed
    (planted / "build.py").write_text("x = 1\nif isinstance(src, (HubSource, TimmSource)):\n    pass\n")
    assert kind_branches(planted) == ["registry/build.py:2"]


def test_an_installed_package_declares_a_kind_under_the_zoo_sources_entry_point(tmp_path: Path, monkeypatch) -> None:
    """A spec using a tag no kind answers to makes the loader import the kinds installed packages declare (the
    ``zoo.sources`` group), once; the spec then validates. Nothing is imported while every tag is known."""
    import importlib.metadata as md

    import registry.sources.base as base
    from registry.loader import load_spec_file

    calls = []

    def entry_points(group: str):
        calls.append(group)
        return [md.EntryPoint(name="alias", value=f"{__name__}:AliasSource", group=group)] if group == "zoo.sources" else []

    monkeypatch.setattr(md, "entry_points", entry_points)
    monkeypatch.setattr(base, "_entry_points_loaded", False)
    load_spec_file(REPO / "specs" / "f-dpmsolver.yaml")
    assert calls == []  # every tag known: no entry point is read
    try:
        spec = load_spec_file(_user_spec(tmp_path / "specs", "my-alias-installed"))
        assert calls == ["zoo.sources"] and spec.models["denoiser"].variants["toy"].source == "toy-alias"
    finally:
        unregister(AliasSource)
