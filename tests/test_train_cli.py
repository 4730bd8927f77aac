"""`zoo train NAME [--check] [--out-dir D] [--only ENTRY]`: a spec's `training:` entries name registered
trainers and the declared files they produce; `--check` compares the produced bytes with the spec's sha256."""
from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest
from test_check_failure_report import echo_spec, write_plugin

from zoo.cli import main

PLUGIN = '''
from pydantic import Field
from registry.contract import Options, Procedure, factory, trainer, transform


class Echo(Procedure):
    def __call__(self, *, seed=0):
        return seed


class MakeOptions(Options):
    text: str = Field("v1", max_length=100)
    skip: bool = False


@trainer(options=MakeOptions)
def make(ctx, opts):
    """Writes the declared file (its bytes come from the spec's params); skip=True forgets it."""
    if not opts.skip:
        ctx.path("made.bin").write_text(opts.text)
    print(f"trained seed={ctx.seed} cached={ctx.use_cache}")


@factory
def blob():
    return object()


@transform
def noop(model, made, other):
    return model


@trainer
def other(ctx, opts):
    ctx.path("other.bin").write_text("other")
'''


def _spec(made_sha: str, other_sha: str, params: str = "{}") -> str:
    """A spec declaring two shipped files (as transform_config file values) and the two trainers making them."""
    return echo_spec("train-demo", "zoo_train_demo", textwrap.dedent(f"""\
        models:
          a:
            kind: blob
            variants:
              toy: {{source: zoo, factory: "zoo_train_demo:blob", transform: "zoo_train_demo:noop",
                     transform_config: {{made: {{file: weights/made.bin, sha256: {made_sha}}},
                                         other: {{file: weights/other.bin, sha256: {other_sha}}}}}}}
        training:
          made: {{trainer: "zoo_train_demo:make", produces: [weights/made.bin], params: {params}}}
          other: {{trainer: "zoo_train_demo:other", produces: [weights/other.bin]}}
        """))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def train_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    spec = write_plugin(tmp_path, monkeypatch, "zoo_train_demo", PLUGIN, _spec(_sha("v1"), _sha("other")))
    (tmp_path / "weights").mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return spec


def test_check_retrains_and_compares_with_the_spec(train_spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", str(train_spec), "--check"]) == 0
    out = capsys.readouterr().out
    assert f"OK   weights/made.bin: sha256 {_sha('v1')} == spec {_sha('v1')}" in out
    assert "OK   weights/other.bin" in out and "trained seed=0 cached=False" in out
    assert list(Path.cwd().iterdir()) == []  # --check trains into a temporary folder
    # other bytes than the spec's: --check fails and says why digests may differ
    train_spec.write_text(_spec(_sha("v1"), _sha("other"), "{text: v2}"))
    assert main(["train", str(train_spec), "--check", "--only", "made"]) == 1
    out = capsys.readouterr().out
    assert f"FAIL weights/made.bin: sha256 {_sha('v2')} != spec {_sha('v1')}" in out and "CPU kernels" in out
    assert "other.bin" not in out  # --only


def test_without_check_it_writes_into_a_fresh_folder_never_the_spec_folder(train_spec: Path, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", str(train_spec)]) == 0
    folder = Path.cwd() / "zoo-train-train-demo"
    assert sorted(p.name for p in folder.iterdir()) == ["made.bin", "other.bin"]
    assert list((tmp_path / "weights").iterdir()) == []
    assert main(["train", str(train_spec), "--out-dir", str(tmp_path / "weights")]) == 0  # refreshing a checkout
    assert (tmp_path / "weights" / "made.bin").read_text() == "v1"


def test_training_errors_are_one_line(train_spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from registry.errors import SpecErrors
    from registry.loader import load_spec_file

    train_spec.write_text(_spec(_sha("v1"), _sha("other"), "{skip: true}"))
    assert main(["train", str(train_spec), "--only", "made"]) == 2
    problems = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("[zoo train")]  # progress lines aside
    assert len(problems) == 1 and "did not write made.bin" in problems[0] and "zoo_train_demo.yaml" in problems[0]
    train_spec.write_text(_spec(_sha("v1"), _sha("other"), "{steps: 3}"))
    assert main(["train", str(train_spec)]) == 2
    err = capsys.readouterr().err
    assert "training.made.params.steps" in err and "unknown option" in err
    assert main(["train", str(train_spec), "--only", "nope"]) == 2
    assert "no training entry 'nope'" in capsys.readouterr().err
    undeclared = _spec(_sha("v1"), _sha("other")).replace("produces: [weights/made.bin]", "produces: [weights/x.bin]")
    train_spec.write_text(undeclared)
    with pytest.raises(SpecErrors, match="'weights/x.bin' is not a file this spec declares"):
        load_spec_file(train_spec)
    plain = tmp_path / "plain.yaml"
    plain.write_text(echo_spec("plain-demo", "zoo_train_demo"))
    assert main(["train", str(plain)]) == 2
    assert "declares no training" in capsys.readouterr().err


def test_a_digest_recorded_for_this_cpu_is_accepted_only_on_this_cpu(train_spec: Path, capsys: pytest.CaptureFixture[str],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`elsewhere: {SIGNATURE: {file: sha256}}` records what unchanged code writes on a CPU whose kernels round
    differently from the shipping machine's: --check accepts it there (OK*, saying so), nowhere else, and never a
    third digest."""
    import registry.hardware as hardware

    monkeypatch.setattr(hardware, "cpu_kernel_signature", lambda: "x86_64/AVX512/amx_tile")
    text = _spec(_sha("v1"), _sha("other"), "{text: v2}")
    recorded = text.replace("params: {text: v2}}", "params: {text: v2}, elsewhere: {x86_64/AVX512/amx_tile: {weights/made.bin: %s}}}" % _sha("v2"))
    assert recorded != text
    train_spec.write_text(recorded)
    assert main(["train", str(train_spec), "--check", "--only", "made"]) == 0
    out = capsys.readouterr().out
    assert f"OK*  weights/made.bin: sha256 {_sha('v2')} == the digest recorded for this CPU (spec {_sha('v1')} was made on another CPU)" in out
    assert "kernel signature is x86_64/AVX512/amx_tile" in out
    monkeypatch.setattr(hardware, "cpu_kernel_signature", lambda: "x86_64/AVX2/fma")  # another CPU: only the spec counts
    assert main(["train", str(train_spec), "--check", "--only", "made"]) == 1
    assert f"FAIL weights/made.bin: sha256 {_sha('v2')} != spec {_sha('v1')}" in capsys.readouterr().out
    monkeypatch.setattr(hardware, "cpu_kernel_signature", lambda: "x86_64/AVX512/amx_tile")
    train_spec.write_text(recorded.replace("{text: v2}", "{text: v3}"))  # the recipe changed: neither digest
    assert main(["train", str(train_spec), "--check", "--only", "made"]) == 1
    assert f"!= spec {_sha('v1')} and != this CPU's recorded {_sha('v2')}" in capsys.readouterr().out


def test_a_recorded_digest_must_name_a_file_the_entry_produces(train_spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    train_spec.write_text(_spec(_sha("v1"), _sha("other")).replace(
        "produces: [weights/made.bin], params: {}}", "produces: [weights/made.bin], params: {}, elsewhere: {cpu-a: {weights/other.bin: %s}}}" % _sha("x")))
    assert main(["train", str(train_spec), "--check"]) == 2
    err = capsys.readouterr().err
    assert "training.made" in err and "elsewhere.cpu-a names 'weights/other.bin', which this entry does not produce" in err


def test_the_kernel_signature_names_architecture_dispatch_and_flags() -> None:
    import platform

    import torch

    from registry.hardware import cpu_kernel_signature

    arch, dispatch, flags = cpu_kernel_signature().split("/")
    assert arch == platform.machine() and dispatch == torch.backends.cpu.get_cpu_capability() and flags
