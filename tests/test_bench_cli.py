"""`zoo bench NAME [--quick] [args]` runs the benchmark a spec names in `bench:`
(resolved through the allowlist), so metric `command:` lines work from an installed wheel."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_check_failure_report import echo_spec, write_plugin

from zoo.cli import main

PLUGIN = '''
import json, sys
from registry.contract import Procedure, benchmark

CALLS = []


class Echo(Procedure):
    def __call__(self, *, seed=0):
        return seed


@benchmark
def bench_main(argv):
    """A benchmark: records its argv, prints a table line, exits 3 when asked."""
    CALLS.append(list(argv))
    print("| bench | " + json.dumps(argv) + " |")
    return 3 if "--fail" in argv else 0


def unregistered_main(argv):
    return 0
'''

@pytest.fixture
def bench_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return write_plugin(tmp_path, monkeypatch, "zoo_bench_demo", PLUGIN,
                        echo_spec("bench-demo", "zoo_bench_demo", 'bench: "zoo_bench_demo:bench_main"\n'))


def test_zoo_bench_calls_the_spec_bench_with_quick_and_extra_args(bench_spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import zoo_bench_demo  # type: ignore[import-not-found]

    assert main(["bench", str(bench_spec), "--quick", "--rows", "7"]) == 0
    assert zoo_bench_demo.CALLS[-1] == ["--quick", "--rows", "7"]
    assert '| bench | ["--quick", "--rows", "7"] |' in capsys.readouterr().out
    assert main(["bench", str(bench_spec), "--", "--fail"]) == 3  # the benchmark's exit status
    assert zoo_bench_demo.CALLS[-1] == ["--fail"]


def test_zoo_bench_errors_are_one_line(bench_spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    none = tmp_path / "no-bench.yaml"
    none.write_text(echo_spec("bench-demo", "zoo_bench_demo"))
    assert main(["bench", str(none)]) == 2
    assert "declares no benchmark" in capsys.readouterr().err
    evil = tmp_path / "evil.yaml"
    evil.write_text(echo_spec("bench-demo", "zoo_bench_demo", 'bench: "os:system"\n'))
    assert main(["validate", str(evil)]) == 2
    assert "bench: 'os:system' is not allowed" in capsys.readouterr().err
    assert main(["bench", str(evil)]) == 2
    assert "not allowed" in capsys.readouterr().err


def test_zoo_bench_runs_the_f_dpmsolver_benchmark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The worked example: the F-DPMSolver benchmark lives in its package (no tools/ needed)."""
    from test_cli_run_steps import TOY_SPEC

    spec = tmp_path / "f.yaml"
    spec.write_text(TOY_SPEC.format(steps=10) + 'bench: "zoo.methods.f_dpmsolver.benchmark:run"\n')
    out_dir = tmp_path / "out"
    assert main(["bench", str(spec), "--quick", "--rows", "16", "--grids", "vp", "--mixtures", "gaussian",
                 "--out-dir", str(out_dir)]) == 0
    out = capsys.readouterr().out
    assert "claim F-DDIM < DDIM at every NFE >= 5 [vp, gaussian]" in out
    assert "claim F-DDIM < DDIM" in (out_dir / "my-f-ddim-bench.md").read_text()
    rows = json.loads((out_dir / "my-f-ddim-bench.json").read_text())["result"]["toy"]
    assert sorted({r["nfe"] for r in rows}) == [5, 10] and {r["sampler"] for r in rows} >= {"F-DDIM", "DDIM"}
    assert (out_dir / "f-dpmsolver-bench.png").stat().st_size > 5000


def test_a_baseline_spec_runs_the_f_dpmsolver_benchmark_without_the_digits_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ddim names the F-DPMSolver benchmark as its bench: (its rows are the baseline); it has no digits variant, so
    the digits rows asked for are left out with a note instead of failing, and the files are named after ddim."""
    out_dir = tmp_path / "out"
    assert main(["bench", "ddim", "--quick", "--digits", "--rows", "8", "--grids", "vp", "--mixtures", "gaussian",
                 "--out-dir", str(out_dir)]) == 0
    assert "no digits rows: spec ddim has no digits variant" in capsys.readouterr().out
    result = json.loads((out_dir / "ddim-bench.json").read_text())["result"]
    assert result["digits"] is None and {r["sampler"] for r in result["toy"]} >= {"DDIM", "F-DDIM"}
    assert (out_dir / "ddim-bench.md").is_file() and (out_dir / "f-dpmsolver-bench.png").is_file()


def test_zoo_bench_refuses_a_bench_that_is_not_registered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """sec-exec: a spec's bench: resolves only to a function decorated with @registry.contract.benchmark."""
    spec = write_plugin(tmp_path, monkeypatch, "zoo_bench_demo2", PLUGIN,
                        echo_spec("bench-demo2", "zoo_bench_demo2", 'bench: "zoo_bench_demo2:unregistered_main"\n'))
    assert main(["bench", str(spec), "--quick"]) == 2
    assert "not registered as a benchmark" in capsys.readouterr().err


def _bench_help(name: str, capsys: pytest.CaptureFixture[str]) -> str:
    """What `zoo bench NAME -- --help` prints (argparse exits 0 after printing)."""
    with pytest.raises(SystemExit) as exc:
        main(["bench", name, "--", "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


def test_builtin_metric_bench_commands_name_a_benchmark_that_takes_their_options(capsys: pytest.CaptureFixture[str]) -> None:
    """Every built-in metric `command:` of the form `zoo bench NAME [--opt ...]` names a spec that declares a
    `bench:`, and every option it passes is one that benchmark's `--help` lists (so the line runs as written
    from an installed wheel); each such benchmark also has `--quick`."""
    import re

    import zoo

    commands: dict[str, set[str]] = {}
    for n in zoo.list():
        for m in zoo.spec(n).metrics:
            for hit in re.finditer(r"zoo bench ([\w.-]+)([^()]*)", m.command or ""):
                commands.setdefault(hit.group(1), set()).update(re.findall(r"(--[\w-]+)", hit.group(2)))
    assert {"poe-bridge", "sae-feature-death", "sae-tm", "f-dpmsolver", "ddim"} <= set(commands)
    for name, opts in sorted(commands.items()):
        assert zoo.spec(name).bench is not None, name
        text = _bench_help(name, capsys)
        missing = [o for o in sorted(opts | {"--quick"}) if o not in text]
        assert not missing, (name, missing)


# ----------------------------------------------------------------------------- the engine-owned benchmark CLI
NEW_SHAPE = '''
from typing import Any, ClassVar, Literal

from pydantic import Field
from registry.contract import Options, Procedure, benchmark

RUNS = []


class Echo(Procedure):
    def __call__(self, *, seed=0):
        return seed


class DemoOptions(Options):
    rows: int = Field(100, ge=1, le=10_000, description="rows per arm")
    arms: list[str] = Field(["a", "b"], max_length=8, description="which arms")
    mode: Literal["fast", "exact"] = "exact"
    dims: list[Literal[1, 2]] = Field([1, 2], max_length=2, description="dimensions (non-string choices)")
    lr: float | None = Field(None, gt=0, le=1, description="step size (default: the recipe's)")
    plot: bool = True
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], max_length=8, description="training seeds")
    quick: ClassVar[dict[str, Any]] = {"rows": 7, "arms": ["a"]}


@benchmark(options=DemoOptions)
def run(ctx, opts):
    """Demo benchmark: echoes its options."""
    RUNS.append((ctx, opts))
    ctx.report(f"| rows | {opts.rows} |")
    if opts.plot:
        ctx.figure("demo.png").write_bytes(b"png")
    ctx.write_text("notes/extra.txt", "more")
    return {"rows": opts.rows, "seed": ctx.seed, "quick": ctx.quick, "pipe": ctx.pipeline().variant}
'''


@pytest.fixture
def new_bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, object]:
    spec = write_plugin(tmp_path, monkeypatch, "zoo_bench_new", NEW_SHAPE,
                        echo_spec("bench-new", "zoo_bench_new", 'bench: "zoo_bench_new:run"\n'))
    import zoo_bench_new  # type: ignore[import-not-found]

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return spec, zoo_bench_new


def test_new_shape_gets_the_engine_flags_and_its_options(new_bench, capsys: pytest.CaptureFixture[str]) -> None:
    spec, mod = new_bench
    with pytest.raises(SystemExit) as exc:
        main(["bench", str(spec), "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for flag in ("--quick", "--json", "--out-dir", "--seed", "--help", "--rows", "--arms", "--mode", "--lr", "--plot", "--no-plot"):
        assert flag in text, flag
    assert "rows per arm (default 100; quick 7)" in text and "engine options (the same for every benchmark)" in text
    assert "training seeds (default [0, 1, 2])" in text and "Undefined" not in text  # a default_factory shows its value

    assert main(["bench", str(spec), "--quick", "--arms", "b", "a", "--seed", "5"]) == 0
    ctx, opts = mod.RUNS[-1]
    assert (opts.rows, opts.arms, opts.mode, opts.lr, ctx.seed, ctx.quick) == (7, ["b", "a"], "exact", None, 5, True)  # explicit wins
    out = capsys.readouterr()
    assert "| rows | 7 |" in out.out
    folder = Path.cwd() / "zoo-bench-bench-new"  # the default: a folder named after the spec, under the cwd
    assert sorted(p.name for p in Path.cwd().iterdir()) == ["zoo-bench-bench-new"]  # nothing else in the cwd
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        "bench-new-bench.json", "bench-new-bench.md", "demo.png", "notes/extra.txt"]
    doc = json.loads((folder / "bench-new-bench.json").read_text())
    assert doc["result"] == {"rows": 7, "seed": 5, "quick": True, "pipe": "toy"}
    assert doc["options"]["arms"] == ["b", "a"] and doc["seed"] == 5 and doc["quick"] is True
    assert (folder / "bench-new-bench.md").read_text() == "| rows | 7 |\n"  # a fresh report per run
    assert f"wrote {folder / 'demo.png'}" in out.err


def test_a_list_of_non_string_choices_is_read_from_its_flag_text(new_bench, capsys: pytest.CaptureFixture[str]) -> None:
    spec, mod = new_bench
    assert main(["bench", str(spec), "--quick", "--dims", "2"]) == 0
    assert mod.RUNS[-1][1].dims == [2] and isinstance(mod.RUNS[-1][1].dims[0], int)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["bench", str(spec), "--quick", "--dims", "3"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "--dims" in err[-1] and "'3'" in err[-1] and "choose from '1', '2'" in err[-1]  # after argparse's usage lines


def test_new_shape_json_out_dir_and_one_line_errors(new_bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec, mod = new_bench
    out_dir = tmp_path / "elsewhere"
    assert main(["bench", str(spec), "--json", "--out-dir", str(out_dir), "--rows", "12", "--lr", "0.5", "--no-plot",
                 "--mode", "fast"]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)  # stdout is the JSON document only; the table went to stderr
    assert doc["result"]["rows"] == 12 and doc["options"] == {"rows": 12, "arms": ["a", "b"], "mode": "fast", "dims": [1, 2], "lr": 0.5, "plot": False, "seeds": [0, 1, 2]}
    assert "| rows | 12 |" in out.err and not (out_dir / "demo.png").exists()
    assert not (Path.cwd() / "zoo-bench-bench-new").exists()
    for argv, flag in ((["--rows", "0"], "--rows"), (["--rows", "many"], "--rows"), (["--lr", "2"], "--lr"), (["--seed", "-1"], "--seed")):
        assert main(["bench", str(spec), *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and flag in err, err
    with pytest.raises(SystemExit) as exc:  # argparse: an unknown flag or a bad choice is its own usage error
        main(["bench", str(spec), "--mode", "slow"])
    assert exc.value.code == 2


def test_options_models_are_checked_when_registered() -> None:
    from typing import Any, ClassVar

    from registry.contract import Options, benchmark, trainer

    class Shadow(Options):
        seed: int = 0

    with pytest.raises(TypeError, match="shadows an engine flag"):
        benchmark(options=Shadow)(lambda ctx, opts: {})

    class BadQuick(Options):
        rows: int = 10
        quick: ClassVar[dict[str, Any]] = {"rowz": 1}

    with pytest.raises(TypeError, match="quick names 'rowz'"):
        benchmark(options=BadQuick)(lambda ctx, opts: {})
    with pytest.raises(TypeError, match=r"expected fn\(ctx, opts\)"):
        trainer(lambda ctx: None)


def test_outputs_stay_inside_the_output_folder(tmp_path: Path) -> None:
    from registry.context import Context
    from registry.errors import ZooError

    ctx = Context(object(), out_dir=tmp_path / "out")  # type: ignore[arg-type]
    for bad in ("../x.png", "/tmp/x.png", "a/../../x", "~/x", ""):
        with pytest.raises(ZooError, match="inside the output folder"):
            ctx.path(bad)
    assert ctx.path("a/b.png") == (tmp_path / "out" / "a" / "b.png").resolve()


def test_every_converted_builtin_benchmark_shows_the_same_engine_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """`zoo bench NAME --help` of every built-in benchmark in the engine-owned shape lists the engine's five flags
    under the same heading, then its own options (robuq, probe and deep-forcing at least)."""
    import zoo
    from registry.resolve import resolve

    converted = [n for n in zoo.list() if zoo.spec(n).bench and getattr(resolve(zoo.spec(n).bench, kind="benchmark"), "zoo_options", None)]
    assert {"robuq", "probe", "deep-forcing"} <= set(converted)
    for name in converted:
        with pytest.raises(SystemExit) as exc:
            main(["bench", name, "--help"])
        assert exc.value.code == 0
        text = " ".join(capsys.readouterr().out.split())
        assert text.startswith(f"usage: zoo bench {name} [-h] [--quick] [--json] [--out-dir DIR] [--seed N]"), text[:200]
        assert "engine options (the same for every benchmark):" in text and f"{name} options:" in text
