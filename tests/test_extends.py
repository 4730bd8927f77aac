"""``extends:``: merge semantics as properties, and located errors across files."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from registry.errors import SpecError
import copy

from registry.loader import load_spec_file, merge

FIXTURES = Path(__file__).parent / "fixtures" / "specs"
keys = st.sampled_from(list("abcde"))
leaves = st.one_of(st.integers(0, 9), st.lists(st.integers(0, 9), max_size=2), st.text("xy", max_size=2))
overlays = st.recursive(st.dictionaries(keys, st.one_of(leaves, st.none()), max_size=4),
                        lambda c: st.dictionaries(keys, st.one_of(leaves, st.none(), c), max_size=4), max_leaves=10)
bases = st.recursive(st.dictionaries(keys, leaves, max_size=4), lambda c: st.dictionaries(keys, st.one_of(leaves, c), max_size=4), max_leaves=10)


@given(bases, overlays)
def test_merge_is_idempotent(a: dict, b: dict) -> None:
    """Invariant: applying the same child twice changes nothing the second time."""
    assert merge(merge(a, b), b) == merge(a, b)


@given(bases, overlays)
def test_merge_local_wins(a: dict, b: dict) -> None:
    """Invariant: every non-null leaf the child sets is in the result; every null deletes."""
    out = merge(a, b)

    def check(over: dict, got: dict) -> None:
        for k, v in over.items():
            if v is None:
                assert k not in got
            elif isinstance(v, dict):
                check(v, got[k])
            else:
                assert got[k] == v

    check(b, out)


@given(bases, overlays)
def test_merge_never_mutates_its_inputs(a: dict, b: dict) -> None:
    """Invariant: resolving a child leaves the parent's data untouched (parents are shared)."""
    a0, b0 = copy.deepcopy(a), copy.deepcopy(b)
    merge(a, b)
    assert a == a0 and b == b0


@given(bases)
def test_empty_child_is_identity(a: dict) -> None:
    """Invariant: a child that sets nothing inherits exactly the parent."""
    assert merge(a, {}) == a


def _family(tmp_path: Path, child: str) -> Path:
    shutil.copy(FIXTURES / "demo-affine.safetensors", tmp_path)
    shutil.copy(FIXTURES / "demo-gaussian.yaml", tmp_path / "parent.yaml")
    p = tmp_path / "child.yaml"
    p.write_text(child)
    return p


def test_child_overrides_params_and_inherits_the_rest(tmp_path: Path) -> None:
    p = _family(tmp_path, "extends: parent.yaml\nname: demo-hot\nsamplers:\n  gaussian:\n    params: {temperature: 4.0}\nmetrics: null\n")
    spec = load_spec_file(p)
    assert spec.name == "demo-hot" and spec.samplers["gaussian"].params == {"temperature": 4.0}
    assert spec.samplers["gaussian"].target == "zoo_demo_plugin:GaussianSampler"
    assert spec.metrics == [] and spec.invariants == ["temperature-scales-spread"]


def test_error_in_inherited_field_names_the_parent_file(tmp_path: Path) -> None:
    p = _family(tmp_path, "extends: parent.yaml\nname: demo-bad\n")
    (tmp_path / "parent.yaml").write_text((tmp_path / "parent.yaml").read_text().replace("min_memory_gb: 40", "min_memory_gb: lots"))
    with pytest.raises(SpecError) as exc:
        load_spec_file(p)
    assert str(exc.value).startswith(f"{tmp_path / 'parent.yaml'}:") and "min_memory_gb" in str(exc.value)


def test_extends_cycle_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("extends: b.yaml\nname: a\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\nname: b\n")
    with pytest.raises(SpecError, match="extends cycle: a.yaml -> b.yaml -> a.yaml"):
        load_spec_file(tmp_path / "a.yaml")


def test_catalog_revalidates_children_when_the_parent_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from registry.catalog import Catalog

    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path / "cache"))
    specs = tmp_path / "specs"
    specs.mkdir()
    p = _family(specs, "extends: parent.yaml\nname: demo-child\n")
    (specs / "parent.yaml").write_text((specs / "parent.yaml").read_text().replace("name: demo-gaussian", "name: demo-parent"))
    cat = Catalog()
    cat.add_path(specs)
    assert {"demo-child", "demo-parent"} <= set(cat.list("demo-*"))
    (specs / "parent.yaml").write_text((specs / "parent.yaml").read_text().replace("task: unconditional-sampling", "task: Bad Task"))
    cat2 = Catalog()
    cat2.add_path(specs)
    assert "demo-child" not in cat2.list() and any(b.path == p.resolve() for b in cat2.broken())


# ---------------------------------------------------------------- inherited variants and roles
BUILTIN = Path(__file__).resolve().parents[1] / "specs"


def _digits_builds(child: Path, **kw: object) -> None:
    """The child inherits the digits spec's UNet, whose weights file is relative to the parent."""
    from registry.context import build_pipeline
    from registry.loader import source_dir

    spec = load_spec_file(child, **kw)
    assert spec.models["unet"].variants["toy"].weights == "weights/f-dpmsolver-digits-unet.safetensors"
    assert source_dir(str(child), "unet", "toy", child.parent) == BUILTIN.resolve()
    pipe = build_pipeline(spec, file=child, variant="toy", device="cpu", use_cache=False)
    assert pipe.models["unet"] is not None


def test_inherited_weights_stay_relative_to_the_parent_by_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child in another folder extending ``specs/digits.yaml`` by path (the caller widening
    the folder tree with ``root``) loads and builds: the parent's weights resolve against the
    parent's folder, not the child's."""
    import os

    other = tmp_path / "mine"
    other.mkdir()
    child = other / "digits-mine.yaml"
    child.write_text(f"extends: {os.path.relpath(BUILTIN / 'digits.yaml', other)}\nname: digits-mine\n")
    _digits_builds(child, root=BUILTIN)


def test_extends_by_spec_name_through_the_catalog(tmp_path: Path) -> None:
    """``extends: digits`` names a catalogued spec: no path, no widened root; the parent's own
    weights (inside the parent's folder tree) are fine, and the result is the parent's data."""
    child = tmp_path / "digits-named.yaml"
    child.write_text("extends: digits\nname: digits-named\nsamplers:\n  unet-ddim:\n    params: {num_inference_steps: 7}\n")
    spec = load_spec_file(child)
    parent = load_spec_file(BUILTIN / "digits.yaml")
    assert spec.samplers["unet-ddim"].params == {"role": "unet", "num_inference_steps": 7}
    assert spec.models == parent.models and spec.implementation == parent.implementation
    _digits_builds(child)


def test_child_weights_outside_its_tree_are_still_refused(tmp_path: Path) -> None:
    """Inheriting by name widens nothing for the child's own paths: a weights path the child writes
    outside its folder tree is still an error at its line."""
    child = tmp_path / "digits-evil.yaml"
    child.write_text("extends: digits\nname: digits-evil\nmodels:\n  unet:\n    variants:\n      toy:\n"
                     "        weights: ../../etc/x.safetensors\ntraining: null\n")  # (its trainer produces the parent's file)
    with pytest.raises(SpecError, match=r"digits-evil.yaml:7:9: .*outside the spec's folder tree"):
        load_spec_file(child)


def test_extends_by_name_cycle_and_unknown_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cycles through names are errors naming the chain; an unknown name is one located line."""
    (tmp_path / "a.yaml").write_text("extends: cyc-b\nname: cyc-a\n")
    (tmp_path / "b.yaml").write_text("extends: cyc-a\nname: cyc-b\n")
    monkeypatch.setenv("ZOO_SPECS_PATH", str(tmp_path))
    with pytest.raises(SpecError, match="extends cycle: a.yaml -> b.yaml -> a.yaml"):
        load_spec_file(tmp_path / "a.yaml")
    (tmp_path / "c.yaml").write_text("name: cyc-c\nextends: no-such-spec-zz\n")
    with pytest.raises(SpecError) as exc:
        load_spec_file(tmp_path / "c.yaml")
    assert str(exc.value).startswith(f"{tmp_path / 'c.yaml'}:2:1: extends: no spec named 'no-such-spec-zz'")
    assert "\n" not in str(exc.value)
