"""Every step of docs/plugins.md and docs/writing-a-method.md runs on a freshly scaffolded
plugin; `zoo check --measure` prints reproduced metrics ready to paste; the scaffold ships no placeholder URLs;
the README's `extends:` example passes `zoo check` (a child does not inherit the parent's measured metrics).

The walkthrough runs each `$` line of the pages' ```console blocks in order, in one shell-like state (`cd`,
`export`, `VAR=value cmd`), with one substitution: `pip install -e .` becomes `pip install --no-deps
--no-build-isolation --no-index --target SITE .` with SITE on PYTHONPATH, the same entry points and files
without touching the test environment's packages.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import zoo
from registry.conformance import run_checks

REPO = Path(__file__).resolve().parents[1]
CONSOLE = re.compile(r"^```console\n(.*?)^```", re.M | re.S)


def console_steps(page: Path) -> list[str]:
    """The `$` lines of a page's console blocks, comments removed."""
    steps = []
    for block in CONSOLE.findall(page.read_text()):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append(re.sub(r"\s+#.*$", "", line[2:]).strip())
    return steps


class Shell:
    """Just enough of a shell for the docs: `a && b`, `cd DIR`, `export K=V ...`, `K=V cmd ...`, `> file`."""

    def __init__(self, cwd: Path, site: Path) -> None:
        self.cwd, self.site = cwd, site
        bin_dir = str(Path(sys.executable).parent)
        drop = ("ZOO_ALLOWED_PACKAGES", "PYTHONPATH", "ZOO_SPECS_PATH", "COLUMNS")
        self.env = {k: v for k, v in os.environ.items() if k not in drop}
        self.env.update(PATH=bin_dir + os.pathsep + self.env.get("PATH", ""), HF_HUB_OFFLINE="1", PYTHONPATH=str(site),
                        ZOO_CACHE_DIR=str(cwd / ".zoo-cache"), ZOO_METRICS_DIR=str(cwd / ".zoo-metrics"))
        self.ran: list[str] = []

    def run(self, line: str) -> list[subprocess.CompletedProcess[str]]:
        return [self._one(part.strip()) for part in line.split("&&")]

    def _one(self, cmd: str) -> subprocess.CompletedProcess[str]:
        self.ran.append(cmd)
        words = shlex.split(cmd)
        if words[0] == "cd":
            self.cwd = (self.cwd / words[1]).resolve()
            return subprocess.CompletedProcess(words, 0, "", "")
        if words[0] == "export":
            for word in words[1:]:
                key, _, value = word.partition("=")
                self.env[key] = self._path_value(key, value)
            return subprocess.CompletedProcess(words, 0, "", "")
        env = dict(self.env)
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
            key, _, value = words.pop(0).partition("=")
            env[key] = self._path_value(key, value)
        if words[:3] == ["pip", "install", "-e"]:  # the one substitution (module docstring)
            words = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                     "--target", str(self.site), words[3]]
        elif words[0] == "python":
            words[0] = sys.executable
        out_file = None
        if ">" in words:
            i = words.index(">")
            out_file, words = self.cwd / words[i + 1], words[:i]
        res = subprocess.run(words, cwd=self.cwd, env=env, capture_output=True, text=True, timeout=600)
        if out_file is not None:
            out_file.write_text(res.stdout)
        return res

    def _path_value(self, key: str, value: str) -> str:
        """PYTHONPATH=. means the current folder, kept beside the install target SITE."""
        if key != "PYTHONPATH":
            return value
        return os.pathsep.join([str((self.cwd / p).resolve()) for p in value.split(os.pathsep)] + [str(self.site)])


def _walk(page: str, tmp_path: Path) -> Shell:
    steps = console_steps(REPO / "docs" / page)
    assert steps and steps[0].startswith("zoo new my-sampler")
    shell = Shell(tmp_path, tmp_path / "site")
    for step in steps:
        for res in shell.run(step):
            assert res.returncode == 0, f"{page}: `{step}` exited {res.returncode}:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
    return shell


def test_plugins_page_runs_step_by_step(tmp_path: Path) -> None:
    shell = _walk("plugins.md", tmp_path)
    assert any(c.startswith("pip install -e") for c in shell.ran) and any("pytest" in c for c in shell.ran)
    assert (tmp_path / "site" / "my_sampler" / "specs" / "my-sampler.yaml").is_file()  # installed with its spec data


def test_writing_a_method_page_runs_step_by_step_and_measure_output_pastes(tmp_path: Path) -> None:
    """The development cycle of writing-a-method.md; then the researcher's case: a new reproduced metric with a
    placeholder value fails `zoo check`, and pasting what `--measure` prints makes it pass."""
    shell = _walk("writing-a-method.md", tmp_path)
    assert any(c.endswith("--measure") for c in shell.ran)
    spec = shell.cwd / "my_sampler" / "specs" / "my-sampler.yaml"
    text = spec.read_text()
    spec.write_text(text.replace("value: 0.7979", "value: 0.0"))  # what a researcher writes before measuring
    (fail,) = shell.run(f"zoo check {spec} --no-record --only metric")
    assert fail.returncode == 1 and "measured 0.79" in fail.stdout
    (measure,) = shell.run(f"zoo check {spec} --measure --no-record")
    assert measure.returncode == 0, measure.stderr[-2000:]
    assert "FAIL" in measure.stderr and "FAIL" not in measure.stdout  # the report goes to stderr
    pasted = yaml.safe_load(measure.stdout)["metrics"]
    data = yaml.safe_load(spec.read_text())
    assert [m["name"] for m in pasted] == [m["name"] for m in data["metrics"] if m["kind"] == "reproduced"]
    assert 0.75 < pasted[0]["value"] < 0.85 and {k: v for k, v in pasted[0].items() if k != "value"} == {
        k: v for k, v in data["metrics"][0].items() if k != "value"}
    data["metrics"] = pasted
    spec.write_text(text.splitlines()[0] + "\n" + yaml.safe_dump(data, sort_keys=False))
    (ok,) = shell.run(f"zoo check {spec} --no-record")
    assert ok.returncode == 0 and " 0 failed, 0 skipped" in ok.stdout, ok.stdout[-2000:]


def test_scaffold_has_no_placeholder_urls_and_its_schema_line_resolves(tmp_path: Path) -> None:
    from registry.spec import json_schema
    from zoo.scaffold import scaffold

    for template in ("sampler", "recipe"):
        files = scaffold(f"my-{template}", template, tmp_path)
        for f in files:
            text = f.read_text()
            assert "/.../" not in text and "https://github.com/)" not in text and "https://.../" not in text, f
        spec = next(f for f in files if f.suffix == ".yaml")
        first = spec.read_text().splitlines()[0]
        target = re.fullmatch(r"# yaml-language-server: \$schema=(\S+)", first)
        assert target, first
        schema = (spec.parent / target.group(1)).resolve()
        assert json.loads(schema.read_text()) == json_schema()


README_CHILD = re.compile(r"```yaml\n[ \t]*(extends: f-dpmsolver\n.*?)```", re.S)


def _readme_child(tmp_path: Path, extra: str = "") -> Path:
    (block,) = README_CHILD.findall((REPO / "README.md").read_text())
    path = tmp_path / "f-ddim-20-steps.yaml"
    path.write_text("\n".join(line.strip() for line in block.splitlines()) + "\n" + extra)
    return path


def test_readme_extends_example_passes_zoo_check_metrics(tmp_path: Path) -> None:
    """The child keeps the paper's (reported) numbers and none of the parent's measurements, so `zoo check` has
    nothing to fail; with `inherit_metrics: all` the parent's measurements come back and fail at 20 steps (they
    measured 10): the reason for the default."""
    child = _readme_child(tmp_path)
    spec, parent = zoo.spec(str(child)), zoo.spec("f-dpmsolver")
    assert spec.samplers["f-ddim"].params["num_inference_steps"] == 20
    assert spec.metrics == [m for m in parent.metrics if m.kind == "reported"] and spec.metrics
    assert run_checks([zoo.entry(str(child))], only="::metric[", verbose=False)
    (tmp_path / "all").mkdir()
    keep = _readme_child(tmp_path / "all", "inherit_metrics: all\n")
    assert len(zoo.spec(str(keep)).metrics) == len(parent.metrics)
    assert not run_checks([zoo.entry(str(keep))], only="::metric[", verbose=False)


def test_inherited_metric_positions_follow_the_kept_entries(tmp_path: Path) -> None:
    from registry.loader import read_document

    child = _readme_child(tmp_path)
    doc = read_document(child)
    parent_file = str(REPO / "specs" / "f-dpmsolver.yaml")
    loc = doc.location(("metrics", 0, "value"))
    assert loc.file == parent_file
    first_reported = next(i for i, line in enumerate(Path(parent_file).read_text().splitlines(), 1)
                          if "kind: reported" in line)
    assert loc.line == first_reported
    lone = tmp_path / "lone.yaml"
    lone.write_text((REPO / "specs" / "ddim.yaml").read_text().replace("\nname: ddim\n", "\nname: lone\ninherit_metrics: all\n"))
    with pytest.raises(zoo.ZooError, match="inherit_metrics says what an `extends:` child inherits"):
        zoo.spec(str(lone))


def test_readme_states_measured_install_and_first_run_times() -> None:
    """The setup paragraph states the measured install time and size, why the venv carries CUDA
    packages, and the cold `zoo run` wall and CPU time, with the commands that measure them ("a few seconds
    after the install" was not true: ~40 s cold)."""
    readme = (REPO / "README.md").read_text()
    setup = readme.split("## The three commands", 1)[1].split("```bash", 1)[0]
    assert "a few seconds" not in setup
    assert re.search(r"install took \*\*\d+ min \d+ s\*\* wall", setup) and re.search(r"venv is \*\*\d+(\.\d)? GB\*\*", setup)
    assert re.search(r"\*\*\d+–\d+ s wall\*\*", setup) and "s of CPU" in setup
    assert "CUDA build" in setup and "du -sh .venv" in setup and "/usr/bin/time" in setup


@pytest.mark.parametrize("extra", [["--json"], ["--budget", "5"], ["--only", "build"]])
def test_measure_refuses_options_it_would_ignore(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from zoo.cli import main

    assert main(["check", "ddim", "--measure", *extra]) == 2
    err = capsys.readouterr().err
    assert "zoo check --measure runs the metric checks only and prints YAML" in err and len(err.strip().splitlines()) == 1
