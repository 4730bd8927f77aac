"""``tiny: {config: ...}`` on a hub-file role: the conformance loading-path check of a ``source: zoo`` role whose weights
are one hub file runs for any variant (declared-only too) on a tiny model of the same key layout, fails when the
converter's inverse is wrong, says what to add when it cannot run, and a bad value is one located line.
A third-party spec in a temp folder, the factory and converters of ``tests/fixtures/zoo_ext_plugin``; no network."""
from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

import zoo_ext_plugin
from registry.lint import lint
from registry.loader import load_spec_file
from registry.spec import Spec

from engine_ext_helpers import LIN, run_all, spec_dict, write_spec

REV = "c" * 40
CHECK = "ext-demo::loading-path[model.full]"
FIELD = "models.model.variants.full"
#: the paper-sized role: 64 layers of width 8192 (17 GB of float32) would never be built by a check
PAPER = {"source": "zoo", "factory": "zoo_ext_plugin:build_stack", "config": {"depth": 64, "width": 8192},
         "weights": {"hub": "owner/stack", "revision": REV, "filename": "ckpt/model.safetensors", "sha256": "0" * 64},
         "convert": "zoo_ext_plugin:from_upstream_stack"}
TINY = {"depth": 2, "width": 4}


@pytest.fixture(autouse=True)
def _allow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOO_ALLOWED_PACKAGES", "zoo_demo_plugin,zoo_ext_plugin")
    zoo_ext_plugin.BUILT_STACKS.clear()


def full_spec(full: dict, status: str = "declared-only") -> dict:
    hw = {"accelerator": "cuda"}
    if status == "declared-only":
        hw.update(status="declared-only", reason="the paper's checkpoint is not available offline")
    data = spec_dict(variants=["toy", "full"], hardware={"toy": {"accelerator": "cpu"}, "full": hw})
    data["models"]["model"]["variants"] = {"toy": LIN, "full": full}
    return data


def test_tiny_config_runs_the_declared_only_hub_file_check_at_the_tiny_size_and_passes(tmp_path: Path) -> None:
    res = run_all(write_spec(tmp_path, full_spec({**PAPER, "tiny": {"config": TINY}})), only="loading-path")
    assert res == {CHECK: ("PASS", "")}
    # reference + the real loading code, both at tiny.config merged over config, never at the paper's size
    assert zoo_ext_plugin.BUILT_STACKS == [(2, 4), (2, 4)]


def test_tiny_config_is_merged_over_config_and_used_for_a_runnable_variant_too(tmp_path: Path) -> None:
    res = run_all(write_spec(tmp_path, full_spec({**PAPER, "tiny": {"config": {"width": 3}}}, status="runnable")),
                  only="loading-path")
    assert res == {CHECK: ("PASS", "")}
    assert zoo_ext_plugin.BUILT_STACKS == [(64, 3), (64, 3)]  # depth from config, width from tiny.config


def test_tiny_config_check_passes_for_a_role_stored_in_bfloat16(tmp_path: Path) -> None:
    """The round trip checks the converter and key layout, not the role's storage dtype: a ``dtype: bfloat16``
    role (Wan + Self-Forcing in deep-forcing) must not fail because bf16 rounds the check's seeded noise."""
    res = run_all(write_spec(tmp_path, full_spec({**PAPER, "tiny": {"config": TINY}, "dtype": "bfloat16"})),
                  only="loading-path")
    assert res == {CHECK: ("PASS", "")}


def test_tiny_config_check_fails_when_the_converters_inverse_is_wrong(tmp_path: Path) -> None:
    """Negative control: same names and shapes (square kernels), untransposed values -> the round trip differs."""
    bad = {**PAPER, "convert": "zoo_ext_plugin:from_upstream_stack_bad_inverse", "tiny": {"config": TINY}}
    status, msg = run_all(write_spec(tmp_path, full_spec(bad)), only="loading-path")[CHECK]
    assert status == "FAIL"
    assert msg == f"{FIELD}: layers.0.weight does not survive the save -> convert -> load round trip"


def test_declared_only_hub_file_role_without_tiny_config_skips_saying_what_to_add(tmp_path: Path) -> None:
    status, msg = run_all(write_spec(tmp_path, full_spec(PAPER)), only="loading-path")[CHECK]
    assert status == "SKIP"
    assert msg.startswith("variant full is declared-only: the paper's checkpoint is not available offline; ")
    assert f"add `tiny: {{config: {{...}}}}` to {FIELD}" in msg
    assert zoo_ext_plugin.BUILT_STACKS == []  # nothing paper-sized was built


@pytest.mark.parametrize(("tiny", "key", "expected"), [
    ({"width": 0}, "width", "Input should be greater than or equal to 1 (got 0)"),
    ({"width": "four"}, "width", "(got 'four')"),
    ({"widht": 4}, "widht", "unknown parameter; did you mean 'width'? (expected one of: depth, width)"),
])
def test_bad_tiny_config_value_is_one_line_naming_file_line_col_and_field(
        tmp_path: Path, tiny: dict, key: str, expected: str) -> None:
    path = write_spec(tmp_path, full_spec({**PAPER, "tiny": {"config": tiny}}))
    # zoo validate (lint): the factory's params model, located at the key inside tiny.config
    problems = lint(load_spec_file(path), path, resolve=True)
    assert len(problems) == 1
    line = str(problems[0])
    assert "\n" not in line and expected in line
    want_prefix = f"{path.resolve()}:"
    assert line.startswith(want_prefix) and f": {FIELD}.tiny.config.{key}: " in line
    row, col = line.removeprefix(want_prefix).split(":")[:2]
    text = path.read_text().splitlines()[int(row) - 1]
    assert text[int(col) - 1:].startswith(key)  # line:col point at the key in the file
    # the conformance check: the same one line, and nothing was built
    status, msg = run_all(path, only="loading-path")[CHECK]
    assert status == "FAIL" and "\n" not in msg and f"{FIELD}.tiny.config.{key}: " in msg and expected in msg
    assert zoo_ext_plugin.BUILT_STACKS == []


def test_tiny_config_schema_errors() -> None:
    with pytest.raises(ValidationError, match="tiny: only a role whose weights are a hub file"):
        Spec.model_validate(full_spec({**LIN, "tiny": {"config": {"dim": 2}}}))
    with pytest.raises(ValidationError, match="trust_remote_code"):
        Spec.model_validate(full_spec({**PAPER, "tiny": {"config": {"trust_remote_code": True}}}))
    with pytest.raises(ValidationError, match="tiny.config"):
        Spec.model_validate(full_spec({**PAPER, "tiny": {"config": [2, 4]}}))


def test_check_fails_when_the_inverse_swaps_tensors_that_the_factory_initialises_identically(tmp_path: Path) -> None:
    """Negative control for identically initialised tensors (every LayerNorm scale is ones): the harness perturbs the
    factory's parameters before saving, so a swap of two norms cannot pass as a round trip."""
    bad = {**PAPER, "convert": "zoo_ext_plugin:from_upstream_stack_swapped_norms", "tiny": {"config": TINY}}
    status, msg = run_all(write_spec(tmp_path, full_spec(bad)), only="loading-path")[CHECK]
    assert status == "FAIL"
    assert msg.startswith(f"{FIELD}: norms.0.weight does not survive the save -> convert -> load round trip")


def test_check_accepts_tensors_the_converter_fills_with_the_factorys_own_init(tmp_path: Path) -> None:
    """A release without some tensors (new heads, norms) whose converter fills them as the factory initialises
    them still passes; anything read from the file must come back as saved."""
    ok = {**PAPER, "convert": "zoo_ext_plugin:from_upstream_stack_filling_norms", "tiny": {"config": TINY}}
    assert run_all(write_spec(tmp_path, full_spec(ok)), only="loading-path") == {CHECK: ("PASS", "")}


def test_zoo_validate_reports_a_bad_tiny_config_in_one_line_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from zoo.cli import main

    path = write_spec(tmp_path, full_spec({**PAPER, "tiny": {"config": {"depth": 65}}}))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith((f"{path.resolve()}:", f"{path}:"))
    assert f"{FIELD}.tiny.config.depth: Input should be less than or equal to 64 (got 65)" in err
