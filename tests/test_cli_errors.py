"""Malformed specs and bad requests: exit code 2 and exactly one precise line on stderr."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from zoo.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "specs"
GOOD = (FIXTURES / "demo-gaussian.yaml").read_text()


def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    shutil.copy(FIXTURES / "demo-affine.safetensors", tmp_path / "demo-affine.safetensors")
    p = tmp_path / name
    p.write_text(text)
    return p


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    code = main(list(argv))
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    return code, err


def one_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, err = run(capsys, *argv)
    assert code == 2, f"exit code {code}, stderr {err}"
    assert len(err) == 1, err
    return err[0]


def test_good_spec_validates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, GOOD)
    assert main(["validate", str(p)]) == 0
    assert "ok (demo-gaussian)" in capsys.readouterr().out


def test_bad_yaml_names_file_line_col(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, GOOD.replace("tags: [demo]", "tags: [demo"))
    line = one_line(capsys, "validate", str(p))
    assert line.startswith(f"{p}:") and "invalid YAML" in line
    assert line.split(":")[1].isdigit() and line.split(":")[2].isdigit()


def test_duplicate_key_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, GOOD.replace("task: unconditional-sampling", "task: unconditional-sampling\ntask: other"))
    line = one_line(capsys, "validate", str(p))
    assert f"{p}:5:1: task: duplicate key 'task' (first defined at line 4)" in line


def test_unknown_field_suggests_the_right_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, GOOD.replace("tags: [demo]", "tags: [demo]\ninvariant: [x]"))
    line = one_line(capsys, "validate", str(p))
    assert f"{p}:6:1: invariant: unknown field 'invariant'; did you mean 'invariants'?" == line


def test_wrong_type_names_field_and_expected_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, GOOD.replace("min_memory_gb: 40", "min_memory_gb: lots"))
    line = one_line(capsys, "validate", str(p))
    assert "hardware.full.min_memory_gb" in line and "valid number" in line and "'lots'" in line
    assert line.startswith(f"{p}:")


def test_python_yaml_tag_is_refused_not_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "pwned"
    p = write(tmp_path, GOOD.replace("title: ", f"title: !!python/object/apply:os.system ['touch {marker}']\nx: ", 1))
    line = one_line(capsys, "validate", str(p))
    assert "tag" in line and "not allowed" in line and line.startswith(f"{p}:3:")
    assert not marker.exists()


def test_disallowed_target_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, GOOD.replace('target: "zoo_demo_plugin:GaussianSampler"', 'target: "os:system"'))
    line = one_line(capsys, "validate", str(p))
    assert line.startswith(f"{p}:") and "samplers.gaussian.target" in line and "'os' is not in the allowlist" in line
    # and at build time too, through the resolver
    line = one_line(capsys, "run", str(p))
    assert "samplers.gaussian.target" in line and "not allowed" in line


def test_alias_of_foreign_object_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An allowed package re-exporting a foreign callable (``pkg:torch.load``) is still refused."""
    p = write(tmp_path, GOOD.replace('target: "zoo_demo_plugin:GaussianSampler"', 'target: "zoo_demo_plugin:torch.load"'))
    line = one_line(capsys, "run", str(p))
    assert "resolves to torch.serialization.load" in line and "refused" in line


def test_missing_weights(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, GOOD.replace("weights: demo-affine.safetensors", "weights: gone.safetensors"))
    line = one_line(capsys, "run", str(p))
    assert "models.model.variants.toy.weights" in line and "gone.safetensors does not exist" in line
    assert line.startswith(f"{p}:")


def test_wrong_sha256(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import re

    p = write(tmp_path, re.sub(r"sha256: [0-9a-f]{64}", "sha256: " + "ab" * 32, GOOD))
    line = one_line(capsys, "run", str(p))
    assert "models.model.variants.toy.sha256" in line and "sha256 mismatch" in line
    line = one_line(capsys, "validate", str(p))
    assert "sha256 mismatch" in line


def test_gpu_only_variant_on_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, GOOD)
    line = one_line(capsys, "run", str(p), "--variant", "full")
    assert "hardware.full" in line
    assert "variant full needs cuda with ≥40 GB; this machine has cpu only; available here: toy" in line


def test_unknown_parameter_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, GOOD)
    line = one_line(capsys, "run", str(p), "--param", "temprature=2")
    assert "parameter temprature" in line and "expected one of: temperature, steps" in line


def test_invalid_parameter_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, GOOD)
    line = one_line(capsys, "run", str(p), "--param", "temperature=-1")
    assert "parameter temperature" in line and "greater than 0" in line


def test_all_errors_of_a_file_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, GOOD.replace("task: unconditional-sampling", "task: Not Kebab").replace("tags: [demo]", "tagz: [demo]"))
    code, err = run(capsys, "validate", str(p))
    assert code == 2 and len(err) == 2
    assert "task" in err[0] and "tagz" in err[1] and "did you mean 'tags'" in err[1]


def test_debug_shows_traceback(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD)
    with pytest.raises(Exception, match="available here: toy"):
        main(["--debug", "run", str(p), "--variant", "full"])


def test_run_prints_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, GOOD)
    assert main(["run", str(p), "--n", "3"]) == 0
    assert "drew 3 samples" in capsys.readouterr().out
    line = one_line(capsys, "run", str(p), "--m", "3")
    assert "--m: unknown option" in line and "--n" in line


def test_empty_and_non_mapping_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, "")
    assert "empty file" in one_line(capsys, "validate", str(p))
    p = write(tmp_path, "- a\n- b\n", "list.yaml")
    assert "must be a YAML mapping" in one_line(capsys, "validate", str(p))
