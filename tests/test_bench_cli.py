"""Issue #11 item 9: `zoo bench NAME [--quick] [args]` runs the benchmark a spec names in `bench:`
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
    spec.write_text(TOY_SPEC.format(steps=10) + 'bench: "zoo.methods.f_dpmsolver.benchmark:main"\n')
    out_dir = tmp_path / "out"
    assert main(["bench", str(spec), "--quick", "--rows", "16", "--grids", "vp", "--mixtures", "gaussian",
                 "--out-dir", str(out_dir)]) == 0
    out = capsys.readouterr().out
    assert "claim F-DDIM < DDIM at every NFE >= 5 [vp, gaussian]" in out
    rows = json.loads((out_dir / "f-dpmsolver-bench.json").read_text())["toy"]
    assert sorted({r["nfe"] for r in rows}) == [5, 10] and {r["sampler"] for r in rows} >= {"F-DDIM", "DDIM"}
    assert (out_dir / "f-dpmsolver-bench.png").stat().st_size > 5000


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
