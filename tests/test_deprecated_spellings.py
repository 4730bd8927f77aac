"""Spec spellings of the last release (``tiny_config:`` on a zoo source, ``variant_params:``, ``variant_defaults:``)
still load for one release: the loader rewrites them to ``tiny: {config:}``, ``params_by_variant:`` and
``default_by_variant:`` before validation, warns once per occurrence with its ``file:line:col``, keeps later errors
under a renamed key on its line, and refuses the old and the new spelling in one mapping (one located line)."""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from registry.errors import SpecError, ZooDeprecationWarning
from registry.lint import lint
from registry.loader import load_spec_file

NEW = """\
name: ext-demo
title: engine extension demo
task: unconditional-sampling
implementation: zoo_ext_plugin
models:
  model:
    kind: linear
    variants:
      toy: {source: zoo, factory: "zoo_ext_plugin:build_lin", config: {dim: 2}}
      full:
        source: zoo
        factory: "zoo_ext_plugin:build_stack"
        config: {depth: 64, width: 8192}
        weights: {hub: owner/stack, revision: "%(rev)s", filename: ckpt/model.safetensors, sha256: "%(sha)s"}
        convert: "zoo_ext_plugin:from_upstream_stack"
        tiny:
          config: {depth: 2, width: 4}
samplers:
  apply:
    target: "zoo_ext_plugin:Apply"
    params_by_variant:
      full: {role: model}
default: apply
default_by_variant: {full: apply}
variants: [toy, full]
hardware:
  toy: {accelerator: cpu}
  full: {accelerator: cuda, status: declared-only, reason: the paper's checkpoint is not available offline}
""" % {"rev": "c" * 40, "sha": "0" * 64}

#: old key -> (its text in the file, the new spelling named by the warning)
OLD = {
    "tiny_config": (("        tiny:\n          config: {depth: 2, width: 4}\n", "        tiny_config: {depth: 2, width: 4}\n"),
                    "tiny.config"),
    "variant_params": (("    params_by_variant:\n", "    variant_params:\n"), "params_by_variant"),
    "variant_defaults": (("default_by_variant: {full: apply}\n", "variant_defaults: {full: apply}\n"), "default_by_variant"),
}


@pytest.fixture(autouse=True)
def _allow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOO_ALLOWED_PACKAGES", "zoo_demo_plugin,zoo_ext_plugin")


def old_text(*keys: str, text: str = NEW) -> str:
    for key in keys:
        (new, old), _ = OLD[key]
        assert new in text
        text = text.replace(new, old)
    return text


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path.resolve()


def where(path: Path, text: str, line_start: str) -> str:
    """``file:line:col`` of the first line starting (after its indentation) with ``line_start``."""
    for i, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith(line_start):
            return f"{path}:{i}:{len(line) - len(line.lstrip()) + 1}"
    raise AssertionError(line_start)


def load_warned(path: Path) -> tuple[object, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = load_spec_file(path)
    return spec, [str(w.message) for w in caught if issubclass(w.category, ZooDeprecationWarning)]


def test_the_new_spellings_load_without_a_warning(tmp_path: Path) -> None:
    spec, warned = load_warned(write(tmp_path, "new.yaml", NEW))
    assert warned == []
    assert spec.default_for("full") == "apply" and spec.samplers["apply"].params_by_variant == {"full": {"role": "model"}}
    assert spec.models["model"].variants["full"].tiny_factory_config() == {"depth": 2, "width": 4}


@pytest.mark.parametrize("key", list(OLD))
def test_each_old_spelling_loads_to_the_same_spec_and_warns_once_with_its_location(tmp_path: Path, key: str) -> None:
    new_spec, _ = load_warned(write(tmp_path, "new.yaml", NEW))
    text = old_text(key)
    path = write(tmp_path, "old.yaml", text)
    spec, warned = load_warned(path)
    assert spec == new_spec
    assert warned == [f"{where(path, text, key + ':')}: {key} is deprecated, write {OLD[key][1]}"]
    assert issubclass(ZooDeprecationWarning, DeprecationWarning)


def test_every_occurrence_warns_once(tmp_path: Path) -> None:
    text = old_text(*OLD)
    text = text.replace("default: apply\n", "  other:\n    target: \"zoo_ext_plugin:Apply\"\n    variant_params: {toy: {}}\n"
                                             "default: apply\n")
    path = write(tmp_path, "old.yaml", text)
    spec, warned = load_warned(path)
    assert len(warned) == 4 and all(w.startswith(f"{path}:") and "\n" not in w for w in warned)
    assert sorted(w.split(": ", 1)[1] for w in warned) == sorted(
        f"{k} is deprecated, write {OLD[k][1]}" for k in ("tiny_config", "variant_params", "variant_params", "variant_defaults"))
    assert spec.samplers["other"].params_by_variant == {"toy": {}}


@pytest.mark.parametrize(("key", "both"), [
    ("variant_defaults", "variant_defaults: {full: apply}\ndefault_by_variant: {full: apply}\n"),
    ("variant_params", "    variant_params: {full: {role: model}}\n    params_by_variant:\n"),
    ("tiny_config", "        tiny_config: {depth: 2}\n        tiny:\n          config: {depth: 2, width: 4}\n"),
])
def test_the_old_and_the_new_spelling_in_one_mapping_is_one_located_line(tmp_path: Path, key: str, both: str) -> None:
    (new, _), new_name = OLD[key]
    text = NEW.replace(new, both)
    path = write(tmp_path, "both.yaml", text)
    with pytest.raises(SpecError) as exc:
        load_spec_file(path)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(where(path, text, key + ":") + ": ")
    assert f"{key} and {new_name.split('.')[0]} both given" in msg and f"write only {new_name}" in msg


def test_a_validation_error_under_an_old_spelled_key_names_its_line(tmp_path: Path) -> None:
    text = old_text("variant_params").replace("      full: {role: model}\n", "      nope: {role: model}\n")
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(SpecError) as exc, warnings.catch_warnings():
        warnings.simplefilter("ignore", ZooDeprecationWarning)
        load_spec_file(path)
    assert str(exc.value).startswith(where(path, text, "variant_params:") + ": samplers.apply.params_by_variant")
    assert "unknown variant(s) nope" in str(exc.value)


def test_a_schema_error_inside_an_old_tiny_config_names_its_line(tmp_path: Path) -> None:
    text = old_text("tiny_config").replace("tiny_config: {depth: 2, width: 4}", "tiny_config: {trust_remote_code: true}")
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(SpecError) as exc, warnings.catch_warnings():
        warnings.simplefilter("ignore", ZooDeprecationWarning)
        load_spec_file(path)
    row = next(i for i, line in enumerate(text.splitlines(), 1) if "tiny_config:" in line)
    col = text.splitlines()[row - 1].index("trust_remote_code") + 1
    assert str(exc.value).startswith(f"{path}:{row}:{col}: models.model.variants.full.tiny.config")
    assert "trust_remote_code" in str(exc.value)


def test_a_lint_error_on_a_key_inside_an_old_tiny_config_points_at_that_key(tmp_path: Path) -> None:
    text = old_text("tiny_config").replace("tiny_config: {depth: 2, width: 4}", "tiny_config: {depth: 2, width: 0}")
    path = write(tmp_path, "bad.yaml", text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ZooDeprecationWarning)
        problems = lint(load_spec_file(path), path, resolve=True)
    assert len(problems) == 1
    row = next(i for i, line in enumerate(text.splitlines(), 1) if "tiny_config:" in line)
    col = text.splitlines()[row - 1].index("width: 0") + 1
    assert str(problems[0]).startswith(f"{path}:{row}:{col}: models.model.variants.full.tiny.config.width: ")


def test_extends_each_file_is_rewritten_and_warned_at_its_own_line(tmp_path: Path) -> None:
    """A parent in the old spelling, a child that only overrides an inherited zoo source's ``tiny_config`` (without
    repeating ``source:``): the same Spec as the new spelling, one warning per file, at that file's line."""
    new_parent = write(tmp_path, "new-parent.yaml", NEW)
    new_child = write(tmp_path, "new-child.yaml", "extends: new-parent.yaml\nname: ext-child\nmodels:\n  model:\n"
                      "    variants:\n      full:\n        tiny:\n          config: {width: 3}\n")
    parent_text = old_text("variant_params")
    write(tmp_path, "old-parent.yaml", parent_text)
    child_text = "extends: old-parent.yaml\nname: ext-child\nmodels:\n  model:\n    variants:\n      full:\n" \
                 "        tiny_config: {width: 3}\n"
    child = write(tmp_path, "old-child.yaml", child_text)
    assert new_parent.exists()
    want, _ = load_warned(new_child)
    spec, warned = load_warned(child)
    assert spec == want and spec.models["model"].variants["full"].tiny_factory_config() == {"depth": 2, "width": 3}
    assert sorted(warned) == sorted([
        f"{where(tmp_path.resolve() / 'old-parent.yaml', parent_text, 'variant_params:')}: variant_params is deprecated, "
        "write params_by_variant",
        f"{where(child, child_text, 'tiny_config:')}: tiny_config is deprecated, write tiny.config"])


def test_tiny_config_on_another_source_kind_stays_an_unknown_field(tmp_path: Path) -> None:
    text = NEW.replace('      toy: {source: zoo, factory: "zoo_ext_plugin:build_lin", config: {dim: 2}}\n',
                       "      toy: {source: transformers, model_class: AutoModel, id: o/m, allow_unpinned: true, "
                       "tiny_config: {x: 1}}\n")
    path = write(tmp_path, "hub.yaml", text)
    with pytest.raises(SpecError) as exc:
        load_spec_file(path)
    assert "unknown field 'tiny_config'" in str(exc.value)


def test_zoo_validate_prints_each_deprecation_as_one_warning_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from zoo.cli import main

    text = old_text("variant_defaults")
    path = write(tmp_path, "old.yaml", text)
    assert main(["validate", str(path)]) == 0
    err = capsys.readouterr().err
    assert f"warning: {where(path, text, 'variant_defaults:')}: variant_defaults is deprecated, write default_by_variant\n" in err
