"""`zoo metrics` -- paper numbers beside ours, paired by name + dataset + setting,
with the last value `zoo check` measured (stored with date, machine and versions) and a PNG."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import zoo
from registry import metrics_store
from zoo.cli import main

SPEC = Path(__file__).parent / "fixtures" / "metrics" / "demo-paired.yaml"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ZOO_METRICS_DIR", str(tmp_path / "metrics"))
    return tmp_path / "metrics"


def test_pairing_rule_is_name_dataset_and_setting() -> None:
    """A reported and a reproduced metric pair iff name, dataset and setting are equal (variant may differ)."""
    rows = metrics_store.rows(zoo.spec(str(SPEC)), measured={})
    by_key = {(r.name, r.dataset, json.dumps(r.setting, sort_keys=True)): r for r in rows}
    paired = by_key[("mean-abs", "standard-normal", '{"temperature": 1.0}')]
    assert paired.paired and [m.variant for m in paired.reported] == ["full"] and [m.variant for m in paired.reproduced] == ["toy"]
    assert not by_key[("mean-abs", "standard-normal", '{"temperature": 2.0}')].paired  # other setting
    assert not by_key[("mean-abs", "laplace", '{"temperature": 1.0}')].paired  # other dataset
    assert not by_key[("mean-abs-t1", "standard-normal", "{}")].paired  # setting in the name
    assert sum(r.paired for r in rows) == 1 and len(rows) == 4


def test_check_stores_the_measurement_and_metrics_shows_it(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`zoo check` stores each re-measured value with date, machine, versions; `zoo metrics` shows it
    beside the paper's number, as text, JSON and a PNG."""
    assert main(["metrics", str(SPEC)]) == 0
    assert "never (zoo check)" in capsys.readouterr().out  # nothing measured yet
    assert main(["check", str(SPEC), "--only", "metric"]) == 0
    capsys.readouterr()
    from registry.loader import load_spec_file

    data = metrics_store.load(load_spec_file(SPEC), SPEC)
    rec = data["mean-abs@standard-normal/toy,temperature=1.0"]
    assert "status" not in rec  # recomputed from value and tolerance when shown, never stored
    pipe = zoo.load(str(SPEC))
    expected = float(pipe(seed=0, n=4000).abs().mean())  # what the check function measures
    assert rec["value"] == pytest.approx(expected, rel=1e-12)
    assert rec["date"][:4].isdigit() and rec["machine"]["device"] == "cpu"
    assert rec["versions"]["python"] and rec["versions"]["pydantic"]
    assert "mean-abs-t1@standard-normal/toy" in data

    assert main(["metrics", str(SPEC), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (row,) = [r for r in report["metrics"] if r["paired"]]
    assert row["paper"][0]["value"] == 0.7979 and row["measured"][0]["value"] == pytest.approx(expected)

    png = tmp_path / "m.png"
    assert main(["metrics", str(SPEC), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "temperature=1.0" in ln and "standard-normal" in ln)
    assert "0.7979" in line and f"{expected:.4g} PASS" in line  # paper, ours and measured on one line
    assert "1 paired (paper and ours), 2 paper only, 1 ours only" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_metrics_without_a_name_lists_every_spec(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics"]) == 0
    out = capsys.readouterr().out
    for name in zoo.list():
        assert f"\n{name}: " in "\n" + out
    assert main(["metrics", "--plot", "x.png"]) == 2  # a plot needs one spec


SETTING_IN_NAME = re.compile(r"-nfe\d+$|-\d+-steps$|-\d+-topics|-m\d+$")


def test_builtin_specs_keep_settings_out_of_metric_names() -> None:
    """Conditions such as NFE, steps, topics or the outlier magnitude live in `setting:`, so
    reported and reproduced numbers can pair (name + dataset + setting)."""
    bad = [f"{n}: {m.name}" for n in zoo.list() for m in zoo.spec(n).metrics if SETTING_IN_NAME.search(m.name)]
    assert not bad, bad


def test_builtin_paper_numbers_measured_on_the_papers_own_data_are_paired() -> None:
    """Where the zoo re-measures a paper's number on the paper's own data (the SAE authors' synthetic
    demo), the reported and reproduced metrics pair, so `zoo metrics` shows them side by side."""
    rows = metrics_store.rows(zoo.spec("sae-feature-death"), measured={})
    paired = {(r.name, r.dataset) for r in rows if r.paired}
    assert {("demo-init-dead-total", "authors-synthetic-demo"), ("demo-init-dead-relu", "authors-synthetic-demo")} <= paired


def test_builtin_metric_commands_work_from_a_wheel() -> None:
    """A metric's `command:` must run for a user who installed the wheel: `zoo check` / `zoo bench`,
    not a checkout's tools/ script."""
    bad = [f"{n}: {m.name}: {m.command}" for n in zoo.list() for m in zoo.spec(n).metrics
           if m.command and "tools/" in m.command]
    assert not bad, bad
