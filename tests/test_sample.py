"""``zoo sample`` writes N rows to disk in verified shards, resumable, over processes with torchrun;
``zoo.read_samples`` reads them back as the typed output a call returns.

The engine-level tests use the planted samplers of ``tests/fixtures/zoo_sample_plugin``; the real ones use
f-dpmsolver (tensors), poe-bridge (text, JSON Lines) and unidflow (text-to-image, tensors + text + a per-call
field). The torchrun tests launch real process groups (gloo on CPU) with ``torchrun -m zoo sample``.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

import zoo
from registry.conformance import assert_same
from registry.contract import row_seed
from registry.errors import ParamError, SampleError
from zoo.cli import main

from engine_ext_helpers import run_all

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
PLUGIN = "zoo_sample_plugin"
SAMPLERS = {name: {"target": f"{PLUGIN}:{cls}"} for name, cls in [
    ("points", "Points"), ("points-one-row", "PointsOneRow"), ("first-seed-only", "FirstSeedOnly"),
    ("batch-drift", "BatchDrift"), ("start-shifted", "StartShifted"), ("undeclared-trace", "UndeclaredTrace"),
    ("batch-mixing", "BatchMixing"), ("no-population", "NoPopulation"), ("plain-list", "PlainList")]}
SPEC = {
    "name": "sample-demo", "title": "zoo sample test plugin", "task": "unconditional-sampling", "implementation": PLUGIN,
    "models": {"model": {"kind": "scale", "variants": {"toy": {"source": "zoo", "factory": f"{PLUGIN}:build_scale"}}}},
    "samplers": SAMPLERS, "recipes": {"fit": {"target": f"{PLUGIN}:Fit"}},
    "default": "points", "variants": ["toy"], "hardware": {"toy": {"accelerator": "cpu"}},
}


@pytest.fixture(autouse=True)
def _allow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOO_ALLOWED_PACKAGES", PLUGIN)


@pytest.fixture
def spec(tmp_path: Path) -> str:
    path = tmp_path / "spec" / "sample-demo.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(SPEC, sort_keys=False))
    return str(path)


def quiet(name: str, n: int, out: Path, **kw: Any) -> Any:
    return zoo.sample(name, n, out, progress=False, **kw)


def files(out: Path) -> dict[str, bytes]:
    """Every file under ``out`` but the manifest (shards, and anything left over), by name."""
    return {p.name: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file() and p.name != "manifest.json"}


def same_output(a: Any, b: Any) -> None:
    assert type(a) is type(b)
    assert_same(dict(vars(a)), dict(vars(b)), exact=True)


def one_row_calls(spec_name: str, n: int, seed: int = 0, **load: Any) -> list[Any]:
    proc = zoo.load(spec_name, **load).procedure
    return [proc(seed=row_seed(seed, i), **proc.population_inputs(i, i + 1)) for i in range(n)]


# ----------------------------------------------------------------------------- rows and their layout
def test_rows_depend_on_seed_and_index_only(spec: str, tmp_path: Path) -> None:
    """Batch 3 / shard 4, batch 10 / shard 10 and the one-row-at-a-time path give the same rows, and row i is the
    one-row call with seed row_seed(S, i); every field kind survives the round trip (tensor rows, a tuple field,
    a list of ragged tensors, a per-call list, a scalar)."""
    a = quiet(spec, 10, tmp_path / "a", batch_size=3, shard_size=4, seed=5)
    quiet(spec, 10, tmp_path / "b", batch_size=10, seed=5)
    c = quiet(spec, 10, tmp_path / "c", batch_size=3, seed=5, sampler="points-one-row")
    assert (a.shards, a.batching, c.batching) == (3, "3 rows per call (per-row seeds)", "one row per call")
    ra, rb, rc = (zoo.read_samples(tmp_path / d) for d in "abc")
    same_output(ra, rb)
    same_output(ra, rc)
    singles = one_row_calls(spec, 10, seed=5)
    assert torch.equal(ra.samples, torch.cat([s.samples for s in singles]))
    assert ra.labels == [s.labels[0] for s in singles] and ra.pairs == tuple(s.pairs[0] for s in singles)
    assert isinstance(ra.pairs, tuple) and all(torch.equal(x, s.pieces[0]) for x, s in zip(ra.pieces, singles))
    assert ra.trace == [0.0, 0.5, 1.0] and ra.steps == 3
    assert len({round(float(v), 6) for v in ra.samples[:, 0]}) == 10  # ten different draws, not one stream repeated
    other = quiet(spec, 10, tmp_path / "d", batch_size=3, seed=6)
    assert not torch.equal(zoo.read_samples(other.out).samples, ra.samples)


def test_f_dpmsolver_rows_are_the_one_row_calls(tmp_path: Path) -> None:
    quiet("f-dpmsolver", 24, tmp_path / "a", variant="toy", batch_size=8, seed=3)
    got = zoo.read_samples(tmp_path / "a")
    want = one_row_calls("f-dpmsolver", 24, seed=3, variant="toy")
    assert type(got).__name__ == "DiffusionOutput" and torch.equal(got.samples, torch.cat([w.samples for w in want]))
    m = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert m["run"]["sampler"] == "f-ddim" and m["run"]["params"]["num_inference_steps"] == 10
    assert m["run"]["spec_sha256"] == __import__("registry.sampling", fromlist=["x"]).spec_sha256(zoo.spec("f-dpmsolver"))
    assert [s["rows"] for s in m["shards"]] == [[0, 8], [8, 16], [16, 24]] and "torch" in m["versions"]


@pytest.mark.slow  # building the digits UNet variant costs ~10-20 s
def test_exact_rows_of_a_batched_network_do_not_depend_on_the_batch_size(tmp_path: Path) -> None:
    """f-dpmsolver's digits UNet: a batched convolution may round a row differently for another batch size (so a
    batched run fixes its batch size), while ``exact=True`` (one call per row) gives the same bytes for any batch size,
    equal to the one-row calls."""
    a = quiet("f-dpmsolver", 6, tmp_path / "a", variant="digits", batch_size=6, exact=True)
    quiet("f-dpmsolver", 6, tmp_path / "b", variant="digits", batch_size=2, shard_size=6, exact=True)
    assert a.batching == "one row per call"
    got = zoo.read_samples(a.out)
    assert got.samples.shape == (6, 1, 8, 8) and torch.equal(got.samples, zoo.read_samples(tmp_path / "b").samples)
    want = one_row_calls("f-dpmsolver", 6, variant="digits")
    assert torch.equal(got.samples, torch.cat([w.samples for w in want]))


def test_text_rows_round_trip_through_json_lines(tmp_path: Path) -> None:
    """poe-bridge: token ids, texts and per-row stats as JSON Lines; batch 2 vs 4 equal; rows = one-row calls."""
    quiet("poe-bridge", 4, tmp_path / "a", batch_size=2)
    quiet("poe-bridge", 4, tmp_path / "b", batch_size=4)
    a, b = zoo.read_samples(tmp_path / "a"), zoo.read_samples(tmp_path / "b")
    same_output(a, b)
    want = one_row_calls("poe-bridge", 4)
    assert a.token_ids == [w.token_ids[0] for w in want] and a.texts == [w.texts[0] for w in want]
    assert a.stats == [w.stats[0] for w in want]
    lines = (tmp_path / "a" / "shard-000000.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["texts"] == a.texts[0]
    assert not list((tmp_path / "a").glob("*.safetensors"))


def test_list_seeds_through_the_pipeline() -> None:
    pipe = zoo.load("f-dpmsolver", variant="toy")
    both = pipe(seed=[11, 12], batch_size=2).samples
    assert torch.equal(both[1:], pipe(seed=12, batch_size=1).samples)
    with pytest.raises(ParamError, match="seed: expected an integer"):
        pipe(seed=[1, -1], batch_size=2)


# ----------------------------------------------------------------------------- resume and interruption
def test_resume_keeps_verified_shards_and_redoes_missing_and_corrupt(spec: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    quiet(spec, 12, out, batch_size=3)
    clean = files(out)
    kept = (out / "shard-000000.safetensors").stat().st_mtime_ns
    raw = bytearray((out / "shard-000002.safetensors").read_bytes())
    raw[-3] ^= 0xFF  # one flipped byte in the tensor data: same size, another hash
    (out / "shard-000002.safetensors").write_bytes(bytes(raw))
    with pytest.raises(SampleError, match="shard-000002.safetensors: sha256 differs"):
        zoo.read_samples(out)
    (out / "shard-000001.safetensors").unlink()
    (out / "shard-000003.jsonl").write_text("")
    again = quiet(spec, 12, out, batch_size=3)
    assert (again.shards_kept, again.shards_written, again.rows_written) == (1, 3, 9)
    assert files(out) == clean and (out / "shard-000000.safetensors").stat().st_mtime_ns == kept
    same_output(zoo.read_samples(out), zoo.read_samples(quiet(spec, 12, tmp_path / "fresh", batch_size=12, shard_size=3).out))


def test_ctrl_c_mid_write_leaves_no_trusted_half_shard(spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while shard 2's file is being renamed into place: no temp file stays, the run is incomplete (read_samples
    refuses), and the next run finishes it to the bytes of an uninterrupted run."""
    import registry.sampling as S

    real, calls = os.replace, []

    def interrupted(src: Any, dst: Any) -> None:
        calls.append(dst)
        if str(dst).endswith("shard-000002.safetensors"):
            raise KeyboardInterrupt
        real(src, dst)

    out = tmp_path / "run"
    monkeypatch.setattr(S.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        quiet(spec, 12, out, batch_size=3)
    monkeypatch.setattr(S.os, "replace", real)
    assert sorted(p.name for p in out.glob("shard-*")) == ["shard-000000.jsonl", "shard-000000.safetensors",
                                                           "shard-000001.jsonl", "shard-000001.safetensors"]
    assert not [p for p in out.rglob("*") if ".tmp-" in p.name]
    with pytest.raises(SampleError, match=r"incomplete \(2 of 4 shards done\)"):
        zoo.read_samples(out)
    # what a kill -9 can leave besides: a temp file and a renamed shard whose record was never written
    (out / ".shard-000003.safetensors.tmp-99999").write_bytes(b"half")
    (out / "shard-000003.safetensors").write_bytes(b"not the real shard")
    again = quiet(spec, 12, out, batch_size=3)
    assert (again.shards_kept, again.shards_written) == (2, 2)
    assert files(out) == files(quiet(spec, 12, tmp_path / "clean", batch_size=3).out)


def test_num_samples_can_grow_and_shrink(spec: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    quiet(spec, 10, out, batch_size=4)  # shards [0,4) [4,8) [8,10)
    grown = quiet(spec, 16, out, batch_size=4)
    assert (grown.shards_kept, grown.shards_written) == (2, 2)
    same_output(zoo.read_samples(out), zoo.read_samples(quiet(spec, 16, tmp_path / "b", batch_size=4).out))
    shrunk = quiet(spec, 8, out, batch_size=4)
    assert (shrunk.shards_kept, shrunk.shards_written) == (2, 0)
    assert sorted(p.name for p in out.glob("shard-*.safetensors")) == ["shard-000000.safetensors", "shard-000001.safetensors"]
    assert zoo.read_samples(out).samples.shape == (8, 2)


def test_another_run_in_the_folder_is_refused(spec: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    quiet(spec, 6, out, batch_size=3)
    before = files(out)
    for kw, why in [({"seed": 1}, "seed 0 there, 1 here"), ({"steps": 4}, "params.steps 3 there, 4 here"),
                    ({"sampler": "points-one-row"}, "sampler points there, points-one-row here"), ({"shard_size": 2}, "shard_size 3 there, 2 here")]:
        with pytest.raises(SampleError, match=why):
            quiet(spec, 6, out, batch_size=3, **kw)
    with pytest.raises(SampleError, match=r"batching 3 rows per call \(per-row seeds\) there, 6 rows per call"):
        quiet(spec, 6, out, batch_size=6)
    assert files(out) == before
    assert quiet(spec, 6, out, batch_size=3).shards_kept == 2
    one = quiet(spec, 6, tmp_path / "exact", batch_size=3, exact=True)
    assert one.batching == "one row per call" and quiet(spec, 6, one.out, batch_size=5, exact=True).shards_kept == 2
    same_output(zoo.read_samples(out), zoo.read_samples(one.out))


# ----------------------------------------------------------------------------- refusals and usage errors
@pytest.mark.parametrize("sampler, why", [
    ("batch-mixing", "batch-mixing is not batch-independent"), ("fit", "fit is a recipe"),
    ("no-population", "defines no population_inputs"), ("plain-list", "needs a typed output"),
    ("undeclared-trace", "declare the field with registry.results.per_call"),
])
def test_samplers_zoo_sample_cannot_use_are_refused(spec: str, tmp_path: Path, sampler: str, why: str) -> None:
    with pytest.raises(SampleError, match=why) as info:
        quiet(spec, 4, tmp_path / "run", sampler=sampler)
    assert "\n" not in str(info.value)
    assert not list((tmp_path / "run").glob("shard-*")) if (tmp_path / "run").exists() else True


@pytest.mark.parametrize("argv, flag, what", [
    (["--num-samples", "0"], "--num-samples", "expected an integer in [1, 100,000,000], got 0"),
    (["--num-samples", "-3"], "--num-samples", "got -3"),
    (["--num-samples", "many"], "--num-samples", "expected an integer, got 'many'"),
    (["--batch-size", "0"], "--batch-size", "got 0"),
    (["--shard-size", "-1"], "--shard-size", "got -1"),
    (["--seed", str(2**62)], "--seed", "row i is seeded"),
    ([], "--num-samples", "required"),
])
def test_bad_counts_are_one_line_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], flag: str,
                                             what: str) -> None:
    base = {"--num-samples": "4", "--out": str(tmp_path / "run")}
    for i in range(0, len(argv), 2):
        base[argv[i]] = argv[i + 1]
    if not argv:
        del base["--num-samples"]
    rc = main(["sample", "f-dpmsolver", *[x for kv in base.items() for x in kv]])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith(f"{flag}: ") and what in err[0], err
    assert not (tmp_path / "run").exists()


def test_bad_out_is_a_one_line_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "afile").write_text("x")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    (tmp_path / "badjson").mkdir()
    (tmp_path / "badjson" / "manifest.json").write_text("{not json")
    assert main(["sample", "f-dpmsolver", "--num-samples", "4", "--out", str(tmp_path / "prev"), "--no-progress"]) == 0
    capsys.readouterr()
    for out, what in [("afile", "is a file; expected a folder"), ("other", "is not empty and holds no zoo sample run"),
                      ("badjson", "manifest.json: not valid JSON"), ("prev --seed 1", "holds another run (seed 0 there, 1 here)")]:
        out, *more = out.split()
        rc = main(["sample", "f-dpmsolver", "--num-samples", "4", "--out", str(tmp_path / out), "--no-progress", *more])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and what in err[0], err
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine" and sorted(os.listdir(tmp_path / "other")) == ["notes.txt"]


# ----------------------------------------------------------------------------- conformance: the per-row-seeds check
def test_per_row_seeds_check_catches_planted_samplers(spec: str) -> None:
    res = run_all(Path(spec), only="::")
    ok = lambda s: res[f"sample-demo::samplers[{s}]::per-row-seeds"]  # noqa: E731
    assert ok("points") == ("PASS", "")
    assert res["sample-demo::samplers[points-one-row]::population"] == ("PASS", "")
    assert ok("first-seed-only")[0] == "FAIL" and "row 1 (per-row seeds)" in ok("first-seed-only")[1]
    assert ok("start-shifted")[0] == "FAIL" and "row 1" in ok("start-shifted")[1]
    assert ok("undeclared-trace")[0] == "FAIL" and "per_call" in ok("undeclared-trace")[1]
    # an inexact batch passes the (allclose) batch-independence check but not zoo sample's exact one
    assert res["sample-demo::samplers[batch-drift]::batch-independence"] == ("PASS", "")
    assert ok("batch-drift")[0] == "FAIL" and "tensors differ" in ok("batch-drift")[1]
    assert not any("batch-mixing" in k and ("per-row" in k or "population" in k) for k in res)


# ----------------------------------------------------------------------------- untrusted folders
def _manifest(out: Path) -> dict[str, Any]:
    return json.loads((out / "manifest.json").read_text())


def test_read_samples_trusts_nothing_in_the_folder(spec: str, tmp_path: Path) -> None:
    out = quiet(spec, 4, tmp_path / "run", batch_size=2).out
    good = _manifest(out)

    def refused(change: Any, what: str) -> None:
        m = json.loads(json.dumps(good))
        change(m)
        (out / "manifest.json").write_text(json.dumps(m))
        with pytest.raises(SampleError, match=what):
            zoo.read_samples(out)

    refused(lambda m: m["shards"][0]["files"][0].update(file="../../etc/passwd"), r"shards\[0\]: expected rows")
    refused(lambda m: m.update(output="zoo_never_imported_here:Evil"), "not a known registry.results.ProcedureOutput")
    assert "zoo_never_imported_here" not in sys.modules
    refused(lambda m: m["kinds"].update(samples="pickle"), "kinds/per_call")
    refused(lambda m: m.update(complete=False), "incomplete")
    (out / "manifest.json").write_text(json.dumps(good))
    target = tmp_path / "elsewhere.safetensors"
    target.write_bytes((out / "shard-000000.safetensors").read_bytes())
    (out / "shard-000000.safetensors").unlink()
    (out / "shard-000000.safetensors").symlink_to(target)
    with pytest.raises(SampleError, match="not a regular file"):
        zoo.read_samples(out)


# ----------------------------------------------------------------------------- torchrun
def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(FIXTURES), str(REPO)]),
           "ZOO_ALLOWED_PACKAGES": PLUGIN, **extra}
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


def torchrun(args: list[str], nproc: int = 2, **popen: Any) -> Any:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--monitor-interval", "0.2",
           "-m", "zoo", "sample", *args, "--no-progress"]
    return subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600, **popen)


def test_torchrun_two_processes_equal_one_process_unidflow(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """unidflow (text-to-image): 2 gloo ranks at batch 4 vs one process at batch 8, bit for bit."""
    r = torchrun(["unidflow", "--num-samples", "32", "--batch-size", "4", "--out", str(tmp_path / "A")])
    assert r.returncode == 0, r.stderr[-2000:]
    assert "32 rows in 8 shards" in r.stderr and "over 2 processes" in r.stderr
    assert main(["sample", "unidflow", "--num-samples", "32", "--batch-size", "8", "--out", str(tmp_path / "B"), "--no-progress"]) == 0
    a, b = zoo.read_samples(tmp_path / "A"), zoo.read_samples(tmp_path / "B")
    same_output(a, b)
    assert a.images.shape == (32, 16) and len(a.captions) == 32 and a.alphas is not None and len(a.alphas) == 16
    assert _manifest(tmp_path / "A")["world_size"] == 2 and _manifest(tmp_path / "A")["kinds"]["alphas"] == "call"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["f-dpmsolver", "poe-bridge"])
def test_torchrun_two_processes_equal_one_process(tmp_path: Path, name: str) -> None:
    """Sharded sampling equals one process: torchrun 2 x batch 8 vs ``zoo sample`` batch 16, read back bit for bit."""
    r = torchrun([name, "--num-samples", "64", "--batch-size", "8", "--out", str(tmp_path / "A")])
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run([sys.executable, "-m", "zoo", "sample", name, "--num-samples", "64", "--batch-size", "16", "--out",
                        str(tmp_path / "B")], env=_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    same_output(zoo.read_samples(tmp_path / "A"), zoo.read_samples(tmp_path / "B"))


@pytest.mark.slow
def test_torchrun_run_killed_after_some_shards_resumes_to_the_same_bytes(spec: str, tmp_path: Path) -> None:
    """kill -9 of the whole torchrun group once some shards exist; torchrun again (same command) finishes it, and the
    shards are the bytes of an uninterrupted one-process run."""
    args = [spec, "--num-samples", "40", "--batch-size", "2", "--param", "sleep_s=0.25", "--out", str(tmp_path / "A")]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "zoo", "sample", *args, "--no-progress"]
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 300
        while len(list((tmp_path / "A").glob("shard-*.safetensors"))) < 4:
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.time() < deadline
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    m = _manifest(tmp_path / "A")
    assert m["complete"] is False
    r = torchrun(args)
    assert r.returncode == 0, r.stderr[-2000:]
    import re

    kept = re.search(r"(\d+) written, (\d+) kept \(verified\)", r.stderr)
    assert kept and int(kept[2]) >= 4 and int(kept[1]) + int(kept[2]) == 20, r.stderr[-500:]
    clean = quiet(spec, 40, tmp_path / "B", batch_size=2, sleep_s=0.25)  # the same run in one process
    assert clean.shards == 20
    assert files(tmp_path / "A") == files(tmp_path / "B")


# ----------------------------------------------------------------------------- the README's commands
def readme_commands() -> list[list[str]]:
    """The shell commands of the README's "Generate at scale" section, split into argv."""
    import shlex

    text = (REPO / "README.md").read_text()
    section = text[text.index("## Generate at scale"):]
    section = section[: section.index("\n## ", 1)]
    blocks = section.split("```bash\n")[1:]
    return [shlex.split(line) for block in blocks for line in block.split("```")[0].splitlines() if line.strip()]


def test_readme_generate_at_scale_commands_are_the_tested_ones(tmp_path: Path) -> None:
    """Every command parses as ``zoo sample`` (alone or after torchrun's own flags); the one-machine command runs as
    written but for a smaller --num-samples and the folder; the torchrun commands' zoo arguments are its own, which
    the torchrun tests run."""
    from zoo.cli import build_parser

    cmds = readme_commands()
    assert len(cmds) == 3 and cmds[0][:2] == ["zoo", "sample"] and all(c[0] == "torchrun" for c in cmds[1:])
    zoo_args = [c[1:] if c[0] == "zoo" else c[c.index("-m") + 2:] for c in cmds]
    for args in zoo_args:
        assert args[0] == "sample" and build_parser().parse_args(args).command == "sample"
    assert zoo_args[1] == zoo_args[0]
    args = list(zoo_args[0])
    args[args.index("--num-samples") + 1] = "1000"
    args[args.index("--out") + 1] = str(tmp_path / "run")
    assert main([*args, "--no-progress"]) == 0
    assert zoo.read_samples(tmp_path / "run").samples.shape == (1000, 2)
