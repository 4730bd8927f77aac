"""The engine's newer surface is untrusted input too — tokenizers loaded outside the builder,
hub ids, run-time caches, the metrics store, sizes in free-form configs, ``extends`` chains, files
inside the spec folder, hub ids / ``requires`` patterns, and ``zoo new`` names. One section per class;
each test failed on the main branch before the fix."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from registry.errors import BuildError, ParamError, SpecError, SpecErrors, ZooError
from registry.loader import load_spec_file
from registry.spec import HubSource

from test_security import DEMO, DEMO_WEIGHTS, FIXTURES, TINY_QWEN, _evil_code  # the shared demo fixtures
from test_security import _env as _security_env

ROOT = Path(__file__).resolve().parents[1]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """test_security's subprocess environment, with this test's own metrics store."""
    return _security_env(tmp_path, **{"ZOO_METRICS_DIR": str(tmp_path / "metrics"), **extra})


def _demo(folder: Path, text: str | None = None, name: str = "spec.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "demo-affine.safetensors").write_bytes(DEMO_WEIGHTS.read_bytes())
    path = folder / name
    path.write_text(DEMO.read_text() if text is None else text)
    return path


def _errors(path: Path) -> str:
    """All located errors of a spec file, one per line (what `zoo validate` prints)."""
    try:
        load_spec_file(path)
    except SpecErrors as exc:
        return "\n".join(exc.lines())
    except SpecError as exc:
        return str(exc)
    raise AssertionError(f"{path} validated")


def _demo_with(tmp_path: Path, old: str, new: str) -> Path:
    text = DEMO.read_text()
    assert old in text, old
    return _demo(tmp_path, text.replace(old, new))


# ============================================================================ 1. remote code / stdin
def _evil_tokenizer(folder: Path, marker: Path) -> Path:
    """A tokenizer folder whose ``tokenizer_config.json`` maps AutoTokenizer to code next to it (writes ``marker``)."""
    from registry.conformance import tiny_tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    tiny_tokenizer().save_pretrained(str(folder))
    (folder / "evil_tok.py").write_text(textwrap.dedent(f"""
        from pathlib import Path
        Path({str(marker)!r}).write_text("remote code ran")
        from transformers import PreTrainedTokenizerFast
        class EvilTokenizer(PreTrainedTokenizerFast):
            pass
    """))
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    cfg.update(auto_map={"AutoTokenizer": [None, "evil_tok.EvilTokenizer"]}, tokenizer_class="EvilTokenizer")
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    return folder


@pytest.mark.parametrize("disable", ["", "1"])
def test_tokenizer_helpers_never_ask_on_stdin_nor_run_folder_code(tmp_path: Path, disable: str) -> None:
    """`find_tokenizer` / `tokenizer_for` passed `trust_remote_code=None`: transformers asked on stdin, and
    answering "y" ran the folder's Python file, even with ZOO_DISABLE_REMOTE_CODE=1. The answer is piped in."""
    marker = tmp_path / "MARKER"
    folder = _evil_tokenizer(tmp_path / "tok", marker)
    script = textwrap.dedent(f"""
        import types
        from zoo.common.masked_dlm import find_tokenizer
        from zoo.common.activations import tokenizer_for
        model = types.SimpleNamespace(config=types.SimpleNamespace(_name_or_path={str(folder)!r}, vocab_size=64))
        try:
            tok = find_tokenizer(model)
            print("loaded", type(tok).__name__)
        except Exception as exc:
            print("refused", type(exc).__name__)
        print("fallback", type(tokenizer_for(model)).__name__)
    """)
    res = subprocess.run([sys.executable, "-c", script], input="y\n" * 8, capture_output=True, text=True, timeout=300,
                         env=_env(tmp_path, ZOO_DISABLE_REMOTE_CODE=disable))
    assert not marker.exists(), f"folder code ran: {res.stdout} {res.stderr[-2000:]}"
    assert "Do you wish to run the custom code" not in res.stdout + res.stderr, res.stdout
    assert res.returncode == 0 and "refused" in res.stdout and "fallback HashTokenizer" in res.stdout, res.stdout + res.stderr


#: Loader calls that may run code, read pickles or reach the network; only ``registry/hub.py`` makes them.
LOADER_ATTRS = {"from_pretrained", "from_single_file", "hf_hub_download", "snapshot_download", "cached_download",
                "load_dataset"}


def loader_calls(source: str, filename: str = "<src>") -> list[str]:
    """``file:line: call`` for every direct pretrained-loader call in ``source``: ``X.from_pretrained(...)``
    (however it is split over lines), ``hf_hub_download(...)``, ``getattr(X, "from_pretrained")``, ``torch.hub.load``
    and ``create_model(..., pretrained=<anything but False>)``."""
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        hit = name in LOADER_ATTRS
        if name == "getattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value in LOADER_ATTRS:
            hit = True
        if name == "load" and isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute) and f.value.attr == "hub":
            hit = True
        if name == "create_model":
            pre = [k.value for k in node.keywords if k.arg == "pretrained"]
            hit = bool(pre) and not (isinstance(pre[0], ast.Constant) and pre[0].value is False)
        if hit:
            out.append(f"{filename}:{node.lineno}: {name}")
    return out


def test_loader_scan_catches_planted_calls() -> None:
    """Negative control of the tree scan: split, aliased and getattr calls are all found; the helper is not."""
    planted = textwrap.dedent("""
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(
            path,
        )
        fn = getattr(AutoTokenizer, "from_pretrained")
        import huggingface_hub as h
        h.snapshot_download("a/b")
        timm.create_model("resnet18", pretrained=flag)
        torch.hub.load("a/b", "m")
        ok = registry.hub.load_pretrained(AutoTokenizer, path)
        timm.create_model("resnet18", pretrained=False)
    """)
    found = loader_calls(planted)
    assert [f.split(": ")[1] for f in found] == ["from_pretrained", "getattr", "snapshot_download", "create_model", "load"], found


def stdin_reads(source: str, filename: str = "<src>") -> list[str]:
    """``file:line: what`` for every way ``source`` could read the terminal: ``input()``, ``getpass()``,
    ``sys.stdin`` / ``sys.__stdin__`` and ``open(0)`` (file descriptor 0), in line order."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename)):
        what = None
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name in ("input", "getpass"):
                what = name
            elif name == "open" and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == 0:
                what = "open(0)"
        elif isinstance(node, ast.Attribute) and node.attr in ("stdin", "__stdin__") and isinstance(node.value, ast.Name) \
                and node.value.id == "sys":
            what = f"sys.{node.attr}"
        if what:
            out.append((node.lineno, f"{filename}:{node.lineno}: {what}"))
    return [line for _, line in sorted(out)]


def test_stdin_scan_catches_planted_reads() -> None:
    """Negative control of the stdin scan: every planted read is found; ``subprocess`` keywords are not reads."""
    planted = textwrap.dedent("""
        answer = input("run the custom code? [y/N] ")
        import sys, getpass
        line = sys.stdin.readline()
        pw = getpass.getpass()
        raw = open(0).read()
        subprocess.run(cmd, stdin=subprocess.DEVNULL)
    """)
    assert [f.split(": ")[1] for f in stdin_reads(planted)] == ["input", "sys.stdin", "getpass", "open(0)"], stdin_reads(planted)


def test_nothing_in_the_project_reads_stdin() -> None:
    """No module of registry/, zoo/ or tools/ reads the terminal, so no prompt (a library's or ours) can be
    answered into consent; the run-time case (transformers' remote-code prompt) is tested above with "y" piped in."""
    offenders = []
    for top in ("registry", "zoo", "tools"):
        for path in sorted((ROOT / top).rglob("*.py")):
            offenders += stdin_reads(path.read_text(), str(path.relative_to(ROOT)))
    assert not offenders, offenders


def test_every_pretrained_loader_call_goes_through_registry_hub() -> None:
    """No module of registry/, zoo/ or tools/ other than registry/hub.py calls a loader directly, so every
    call passes an explicit trust_remote_code and local_files_only (tested on the helper below)."""
    offenders = []
    for top in ("registry", "zoo", "tools"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if path == ROOT / "registry" / "hub.py":
                continue
            offenders += loader_calls(path.read_text(), str(path.relative_to(ROOT)))
    assert not offenders, offenders


def test_hub_helper_passes_explicit_consent_and_local_files_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from registry import hub

    calls: list[tuple[str, dict[str, Any]]] = []

    class Fake:
        __module__ = "transformers.fake"

        @classmethod
        def from_pretrained(cls, ref: str, **kw: Any) -> str:
            calls.append((ref, kw))
            return "model"

    assert hub.load_pretrained(Fake, tmp_path) == "model"
    assert calls[-1] == (str(tmp_path), {"local_files_only": True, "trust_remote_code": False})
    with pytest.raises(TypeError, match="never None"):
        hub.load_pretrained(Fake, tmp_path, trust_remote_code=None)  # type: ignore[arg-type]
    monkeypatch.setenv("ZOO_DISABLE_REMOTE_CODE", "1")
    with pytest.raises(PermissionError, match="ZOO_DISABLE_REMOTE_CODE"):
        hub.load_pretrained(Fake, tmp_path, trust_remote_code=True)
    with pytest.raises(ValueError, match="never resolved against the working directory"):
        hub.load_pretrained(Fake, "./relative/folder")
    assert len(calls) == 1


# ============================================================================ 2. a hub id is a hub id
def _tiny_qwen_folder(folder: Path, marker: Path | None = None) -> Path:
    """A tiny qwen2 checkpoint; with ``marker``, its config maps the auto classes to code that writes it."""
    from transformers import AutoConfig, AutoModelForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    AutoModelForCausalLM.from_config(AutoConfig.for_model(**TINY_QWEN)).save_pretrained(str(folder))
    if marker is not None:
        _evil_code(folder, marker)
        cfg = json.loads((folder / "config.json").read_text())
        cfg.update(model_type="evil", architectures=["EvilModel"],
                   auto_map={"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel"})
        (folder / "config.json").write_text(json.dumps(cfg))
    return folder


REV = "0123456789abcdef0123456789abcdef01234567"


def test_hub_id_never_loads_a_folder_of_that_name_in_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`id: acme/model` (pinned) loaded `./acme/model` from the working directory, and with the caller's
    consent ran its code. Now the id is resolved in the HF cache at its revision, or fails offline."""
    from huggingface_hub import constants

    from registry.build import build_model

    marker = tmp_path / "MARKER"
    work = tmp_path / "work"
    _tiny_qwen_folder(work / "acme" / "model", marker)
    _tiny_qwen_folder(work / "acme" / "plain")
    specs = tmp_path / "specs"
    specs.mkdir()
    _tiny_qwen_folder(specs / "acme" / "plain")  # nor a folder of that name beside the spec
    monkeypatch.chdir(work)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "hf_modules"))
    evil = HubSource(source="transformers", model_class="AutoModelForCausalLM", id="acme/model", revision=REV,
                     trust_remote_code=True)
    with pytest.raises(BuildError, match="not in the local cache|offline") as exc:
        build_model(evil, spec_dir=specs, trust_remote_code=True)
    assert not marker.exists(), "the working directory's model code ran"
    assert "\n" not in str(exc.value)
    plain = HubSource(source="transformers", model_class="AutoModelForCausalLM", id="acme/plain", revision=REV)
    with pytest.raises(BuildError, match="not in the local cache|offline"):
        build_model(plain, spec_dir=specs)
    from registry.weights import missing_offline

    assert missing_offline(plain, specs) == f"acme/plain@{REV[:12]}"  # a spec-side folder is not the hub repo
    # the same id, present in the HF cache at that revision: loaded from there
    snap = Path(constants.HF_HUB_CACHE) / "models--acme--plain" / "snapshots" / REV
    _tiny_qwen_folder(snap)
    model = build_model(plain, spec_dir=specs)
    assert Path(model.config._name_or_path).resolve() == snap.resolve()
    assert missing_offline(plain, specs) is None


# ============================================================================ 3. caches and stores
def _rewrite_first(folder: Path, pattern: str, rewrite: Any) -> Path:
    files = sorted(p for p in folder.rglob(pattern) if not p.name.endswith(".sha256"))
    assert files, f"no {pattern} under {folder}"
    rewrite(files[0])
    return files[0]


@pytest.mark.parametrize("fmt", ["safetensors", "json", "npy"])
def test_a_rewritten_cache_entry_is_rebuilt_with_a_warning(fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached artefact rewritten on disk (a valid file of the same format, other content) was returned as
    is. Now its content hash (written after it) does not match: a warning, and the value is recomputed."""
    import numpy as np
    import torch
    from safetensors.torch import save_file

    from registry.artifacts import cached_artifact

    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path / "cache"))
    good = {"safetensors": lambda: {"x": torch.arange(4.0)}, "json": lambda: {"x": [0, 1, 2, 3]},
            "npy": lambda: np.arange(4.0)}[fmt]
    runs: list[int] = []

    def produce() -> Any:
        runs.append(1)
        return good()

    first = cached_artifact(["rewrite-test", fmt], produce, fmt)  # type: ignore[arg-type]
    assert cached_artifact(["rewrite-test", fmt], produce, fmt) is not None and len(runs) == 1  # type: ignore[arg-type]
    bad = {"safetensors": lambda p: save_file({"x": torch.full((4,), 99.0)}, str(p)),
           "json": lambda p: p.write_text(json.dumps({"x": [99, 99, 99, 99]})),
           "npy": lambda p: np.save(p, np.full(4, 99.0), allow_pickle=False)}[fmt]
    _rewrite_first(tmp_path / "cache", f"*.{fmt}", bad)
    with pytest.warns(UserWarning, match="does not match its content hash|recomput"):
        again = cached_artifact(["rewrite-test", fmt], produce, fmt)  # type: ignore[arg-type]
    assert len(runs) == 2
    flat = lambda v: (v["x"].tolist() if fmt == "safetensors" else v["x"] if fmt == "json" else v.tolist())  # noqa: E731
    assert flat(again) == flat(first) == [0, 1, 2, 3]
    assert cached_artifact(["rewrite-test", fmt], produce, fmt) is not None and len(runs) == 2  # type: ignore[arg-type]


def test_a_rewritten_cached_booster_never_reaches_xgboost(tmp_path: Path) -> None:
    """A cached booster rewritten with a crafted model (children out of range) crashed the process in
    XGBoost (exit 139). Now the entry fails its hash and is refitted; the crafted bytes are never parsed."""
    pytest.importorskip("xgboost")
    fit = textwrap.dedent("""
        import numpy as np, torch, xgboost as xgb
        from registry.artifacts import cached_artifact
        from zoo.common.boosters import booster_from_bytes, booster_to_bytes
        def produce():
            X = np.random.default_rng(0).random((50, 3))
            b = xgb.train({"max_depth": 2, "nthread": 1}, xgb.DMatrix(X, X.sum(1)), 3)
            return {"b": torch.from_numpy(booster_to_bytes(b))}
        raw = cached_artifact(["booster-test"], produce, "safetensors")
        print("prediction", float(booster_from_bytes(raw["b"]).inplace_predict(np.ones((1, 3)))[0]))
    """)
    env = _env(tmp_path)
    first = subprocess.run([sys.executable, "-c", fit], capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]

    def craft(path: Path) -> None:
        import numpy as np
        import torch
        import xgboost as xgb
        from safetensors.torch import save_file

        X = np.random.default_rng(1).random((20, 3))
        m = json.loads(bytes(xgb.train({"max_depth": 2, "nthread": 1}, xgb.DMatrix(X, X.sum(1)), 1).save_raw("json")))
        tree = m["learner"]["gradient_booster"]["model"]["trees"][0]
        tree["left_children"] = [10**6 if c != -1 else -1 for c in tree["left_children"]]
        tree["split_indices"] = [10**6] * len(tree["split_indices"])
        save_file({"b": torch.frombuffer(bytearray(json.dumps(m).encode()), dtype=torch.uint8)}, str(path))

    _rewrite_first(tmp_path / "cache", "*.safetensors", craft)
    second = subprocess.run([sys.executable, "-c", fit], capture_output=True, text=True, env=env, timeout=300)
    assert second.returncode == 0, f"exit {second.returncode}: {second.stderr[-2000:]}"
    assert "content hash" in second.stderr and second.stdout == first.stdout, (second.stdout, second.stderr[-2000:])


def test_the_sae_stream_cache_rebuilds_a_rewritten_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SAE activation-stream cache trusted whatever file was there (and wrote a fixed `.tmp` name).
    Now it is an engine cache entry: a rewritten file is detected and the streams recomputed."""
    import torch
    from safetensors.torch import save_file
    from transformers import BertConfig, BertModel

    from zoo.methods.sae_feature_death.analysis import cached_streams

    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path / "cache"))
    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                intermediate_size=32)).eval()
    texts = ["the zoo model", "a token"]
    first = cached_streams(bert, texts, ["embeddings"], max_tokens=16)
    _rewrite_first(tmp_path / "cache", "*.safetensors",
                   lambda p: save_file({"embeddings": torch.zeros_like(first["embeddings"])}, str(p)))
    with pytest.warns(UserWarning, match="content hash"):
        again = cached_streams(bert, texts, ["embeddings"], max_tokens=16)
    assert torch.equal(again["embeddings"], first["embeddings"])
    assert not list((tmp_path / "cache").rglob("*.tmp"))


# ============================================================================ 4. the metrics store
METRICS_SPEC = FIXTURES / "metrics" / "demo-paired.yaml"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ZOO_METRICS_DIR", str(tmp_path / "metrics"))
    return tmp_path / "metrics"


def _reproduced(spec: Any) -> Any:
    return next(m for m in spec.metrics if m.kind == "reproduced" and m.setting)


def test_a_same_named_spec_never_shows_its_records_beside_the_builtin(store: Path, tmp_path: Path) -> None:
    """Records were keyed by spec name: a third-party spec reusing a name wrote "PASS" beside the other's
    paper number. Now they are keyed by the spec file's path and the sha256 of the resolved spec."""
    from registry import metrics_store

    spec = load_spec_file(METRICS_SPEC)
    m = _reproduced(spec)
    other = tmp_path / "third" / "demo-paired.yaml"
    other.parent.mkdir()
    other.write_text(METRICS_SPEC.read_text().replace('title: "Demo:', 'title: "A copy:'))
    impostor = load_spec_file(other)
    assert impostor.name == spec.name
    metrics_store.record(impostor, m, m.value, spec_file=str(other))
    assert [r for r in metrics_store.rows(spec, spec_file=str(METRICS_SPEC)) if r.measured] == []
    metrics_store.record(spec, m, m.value + 0.001, spec_file=str(METRICS_SPEC))
    (row,) = [r for r in metrics_store.rows(spec, spec_file=str(METRICS_SPEC)) if r.measured]
    assert [x["value"] for x in row.measured] == [pytest.approx(m.value + 0.001)]


def test_status_is_recomputed_and_malformed_records_are_skipped(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A planted record saying PASS for a value far outside the tolerance showed PASS; a malformed record
    crashed `zoo metrics`. Now PASS/FAIL comes from value and tolerance, and a bad record is one warning."""
    from registry import metrics_store
    from zoo.cli import main

    spec = load_spec_file(METRICS_SPEC)
    m = _reproduced(spec)
    path = metrics_store.record(spec, m, m.value + 100 * (m.tolerance or 1) + 1, spec_file=str(METRICS_SPEC))
    data = json.loads(path.read_text())
    data["status"] = "PASS"
    path.write_text(json.dumps(data))
    (row,) = [r for r in metrics_store.rows(spec, spec_file=str(METRICS_SPEC)) if r.measured]
    assert row.measured[0]["status"] == "FAIL"
    for junk in ("not json {", json.dumps([1, 2]), json.dumps({**data, "value": "abc"}), json.dumps({**data, "value": None}),
                 json.dumps({k: v for k, v in data.items() if k != "date"})):
        path.write_text(junk)
        capsys.readouterr()
        assert main(["metrics", str(METRICS_SPEC)]) == 0
        captured = capsys.readouterr()
        warnings = [ln for ln in captured.err.splitlines() if "skipped" in ln]
        assert len(warnings) == 1 and "Traceback" not in captured.err, captured.err
        assert "never (zoo check)" in captured.out


def test_concurrent_writers_lose_no_records(store: Path, tmp_path: Path) -> None:
    """4 processes storing 20 measurements each kept 20 of 80 (read-modify-write of one file). Now 80."""
    script = textwrap.dedent(f"""
        import sys
        from registry import metrics_store
        from registry.loader import load_spec_file
        spec = load_spec_file({str(METRICS_SPEC)!r})
        m = next(x for x in spec.metrics if x.kind == "reproduced")
        w = int(sys.argv[1])
        for i in range(20):
            metrics_store.record(spec, m.model_copy(update={{"setting": {{"worker": w, "i": i}}}}), float(i),
                                 spec_file={str(METRICS_SPEC)!r})
    """)
    env = _env(tmp_path, ZOO_METRICS_DIR=str(store))
    procs = [subprocess.Popen([sys.executable, "-c", script, str(w)], env=env, stderr=subprocess.PIPE, text=True)
             for w in range(4)]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read() if p.stderr else ""
    from registry import metrics_store

    assert len(metrics_store.load(load_spec_file(METRICS_SPEC), str(METRICS_SPEC))) == 80


# ============================================================================ 5. every size is bounded
TINY_LINE = "tiny: {config: {model_type: qwen2, hidden_size: 16,"


def test_tiny_config_sizes_are_bounded_at_validation(tmp_path: Path) -> None:
    """`tiny.config: {hidden_size: 10000000, ...}` validated, and `zoo check` then tried to allocate it."""
    path = _demo_with(tmp_path, TINY_LINE, "tiny: {config: {model_type: qwen2, hidden_size: 10000000,")
    err = _errors(path)
    assert "tiny.config.hidden_size: 10,000,000 is over the limit TINY_CONFIG_INT = 65,536" in err, err
    assert err.startswith(f"{path}:18:"), err


def test_a_tiny_checkpoint_is_counted_on_the_meta_device_before_it_is_built(tmp_path: Path) -> None:
    """Every int of the config within its cap, but their product is a big model: refused before allocation."""
    from registry.conformance import _tiny_checkpoint

    big = {**TINY_QWEN, "hidden_size": 512, "intermediate_size": 2048, "num_hidden_layers": 12, "num_attention_heads": 8,
           "num_key_value_heads": 8, "vocab_size": 8000}
    src = HubSource(source="transformers", model_class="AutoModelForCausalLM", id="o/m", allow_unpinned=True,
                    tiny={"config": big})
    with pytest.raises(ParamError, match="over the limit TINY_PARAMS = 20,000,000") as exc:
        _tiny_checkpoint(src, tmp_path)
    assert "tiny.config" in str(exc.value) and not list(tmp_path.iterdir())


@pytest.mark.parametrize("kwargs,cap", [({"num_classes": 10**9}, "TIMM_NUM_CLASSES"), ({"img_size": 10**6}, "TIMM_IMG_SIZE"),
                                        ({"img_size": [224, 10**6]}, "TIMM_IMG_SIZE"), ({"in_chans": 10**5}, "TIMM_IN_CHANS"),
                                        ({"drop_rate": 5.0}, "drop_rate")])
def test_timm_kwargs_are_bounded(kwargs: dict[str, Any], cap: str) -> None:
    from registry.spec import TimmSource

    with pytest.raises(ValueError, match=cap):
        TimmSource(source="timm", model_name="test_efficientnet", kwargs=kwargs)


def test_metric_check_params_are_validated_and_bounded(tmp_path: Path) -> None:
    """`check_params` reached the check function unvalidated (any size, unknown keys as a TypeError)."""
    from registry.context import build_pipeline

    line = 'check: "zoo_demo_plugin:sample_mean_abs"}'
    for params, match in [("{n: 1000000000000}", r"check_params\.n: 1,000,000,000,000 is over the limit SPEC_INT"),
                          ("{bogus: 1}", "unknown parameter"), ("{n: abc}", "expected an integer, got a string")]:
        path = _demo_with(tmp_path / params.strip("{}").replace(" ", "").replace(":", "-"), line,
                          f'check: "zoo_demo_plugin:sample_mean_draws", check_params: {params}}}')
        spec = load_spec_file(path)
        pipe = build_pipeline(spec, file=path, variant="toy", use_cache=False)
        with pytest.raises(ParamError, match=match) as exc:
            pipe.evaluate(spec.metrics[0].check, **spec.metrics[0].check_params)
        assert "\n" not in str(exc.value)


def test_transform_config_refuses_consent_keys_and_is_validated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`transform_config` reached the transform unvalidated (consent keys and any size included)."""
    from registry.build import build_model
    from registry.spec import ZooSource

    with pytest.raises(ValueError, match="cannot be set by a spec"):
        ZooSource(source="zoo", factory="zoo_ext_plugin:build_lin", transform="zoo_ext_plugin:tag",
                  transform_config={"trust_remote_code": True})
    monkeypatch.setenv("ZOO_ALLOWED_PACKAGES", "zoo_demo_plugin,zoo_ext_plugin")
    for cfg, match in [({"nmae": "x"}, "unknown parameter"), ({"name": "x" * 100_000}, "over the limit SPEC_STR"),
                       ({"name": 3}, "valid string")]:
        src = ZooSource(source="zoo", factory="zoo_ext_plugin:build_lin", transform="zoo_ext_plugin:tag", transform_config=cfg)
        with pytest.raises(ParamError, match=match) as exc:
            build_model(src, spec_dir=tmp_path)
        assert "transform_config" in str(exc.value) and "\n" not in str(exc.value)
    ok = build_model(ZooSource(source="zoo", factory="zoo_ext_plugin:build_lin", transform="zoo_ext_plugin:tag",
                               transform_config={"name": "kept"}), spec_dir=tmp_path)
    assert ok.zoo_tag == "kept"


@pytest.mark.parametrize("change,match", [({"r": 10**6}, "over the limit ADAPTER_RANK"),
                                          ({"auto_mapping": {"base_model_class": "X", "parent_library": "os"}}, "points at code"),
                                          ({"trust_remote_code": True}, "cannot be set"),
                                          ({"target_modules": ["q"] * 100_000}, "over the limit SPEC_LIST")])
def test_adapter_configs_are_validated(change: dict[str, Any], match: str) -> None:
    from registry.weights import check_adapter_config

    base = {"peft_type": "LORA", "r": 2, "lora_alpha": 8, "target_modules": ["q_proj"]}
    check_adapter_config(base, "adapters.0")
    with pytest.raises(ParamError, match=match):
        check_adapter_config({**base, **change}, "adapters.0")


# ============================================================================ 6. extends chains
def _chain(folder: Path, n: int) -> list[Path]:
    """``c0.yaml`` (the demo) <- ``c1.yaml`` <- ... <- ``c{n-1}.yaml``, each child renaming the spec."""
    files = [_demo(folder, name="c0.yaml")]
    for i in range(1, n):
        p = folder / f"c{i}.yaml"
        p.write_text(f"extends: c{i - 1}.yaml\nname: chain-{i}\n")
        files.append(p)
    return files


def test_an_extends_chain_longer_than_the_cap_is_one_located_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 1,200-file chain was a RecursionError traceback; any length was accepted."""
    from zoo.cli import main

    files = _chain(tmp_path, 1200)
    assert main(["validate", str(files[15])]) == 0  # 16 files: at the cap
    capsys.readouterr()
    for f in (files[16], files[-1]):
        assert main(["validate", str(f)]) == 2
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert len(err) == 1 and f"{f}:1:" in err[0] and "EXTENDS_CHAIN = 16" in err[0], err


def test_broken_chains_are_broken_entries_and_parents_are_parsed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A cold `zoo list` re-parsed every parent of every spec (a 450-file chain: minutes). Now each file is
    parsed once per process, and the files past the cap are BROKEN lines."""
    import registry.loader as loader
    from registry.catalog import Catalog

    files = _chain(tmp_path / "specs", 40)
    monkeypatch.setenv("ZOO_SPECS_PATH", str(tmp_path / "specs"))
    monkeypatch.setenv("ZOO_NO_INDEX_CACHE", "1")
    parsed: list[str] = []
    real = loader.parse_yaml

    def counting(text: str, file: str) -> Any:
        parsed.append(file)
        return real(text, file)

    monkeypatch.setattr(loader, "parse_yaml", counting)
    cat = Catalog()
    names = cat.list("chain-*")
    ours = [f for f in parsed if Path(f).parent == tmp_path / "specs"]
    assert sorted(ours) == sorted(str(f) for f in files), f"{len(ours)} parses of {len(files)} files"
    assert len(names) == 15 and len([b for b in cat.broken() if "EXTENDS_CHAIN" in str(b.error)]) == 24
    from zoo.cli import main

    assert main(["--specs", str(tmp_path / "specs"), "list"]) in (0, 1)
    out = capsys.readouterr()
    assert "Traceback" not in out.err + out.out and "RecursionError" not in out.err + out.out


# ============================================================================ 7. files are checked as files
def test_a_symlinked_adapter_weight_pointing_outside_is_refused_without_its_hash(tmp_path: Path) -> None:
    """The adapter folder was checked, not the weights file inside it: a symlink to a file outside was
    hashed and its sha256 printed in the mismatch error (an oracle for any readable file)."""
    import hashlib

    from registry.weights import adapter_folder
    from registry.spec import Adapter

    secret = tmp_path / "secret.txt"
    secret.write_text("outside the spec folder")
    spec_dir = tmp_path / "spec"
    (spec_dir / "lora").mkdir(parents=True)
    (spec_dir / "lora" / "adapter_config.json").write_text("{}")
    (spec_dir / "lora" / "adapter_model.safetensors").symlink_to(secret)
    adapter = Adapter(path="lora", sha256="0" * 64)
    from registry.errors import Location

    with pytest.raises(BuildError, match="outside the spec's folder") as exc:
        adapter_folder(adapter, spec_dir, Location(None, None, None, "adapters.0"))
    assert hashlib.sha256(secret.read_bytes()).hexdigest() not in str(exc.value)


def test_a_local_model_folder_with_a_link_outside_is_refused(tmp_path: Path) -> None:
    from registry.build import build_model

    spec_dir = tmp_path / "spec"
    folder = _tiny_qwen_folder(spec_dir / "model")
    outside = tmp_path / "elsewhere.json"
    outside.write_text((folder / "config.json").read_text())
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to(outside)
    src = HubSource(source="transformers", model_class="AutoModelForCausalLM", id="./model")
    with pytest.raises(BuildError, match="config.json is a link to .* outside the spec's folder"):
        build_model(src, spec_dir=spec_dir)
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to(Path("..") / ".." / "elsewhere.json")  # relative link, same escape
    with pytest.raises(BuildError, match="outside the spec's folder"):
        build_model(src, spec_dir=spec_dir)


def test_local_weights_are_safetensors_only(tmp_path: Path) -> None:
    """A local `.pt` file reached torch.load(weights_only=True); the README says shipped weights are safetensors."""
    from registry.spec import ZooSource

    with pytest.raises(ValueError, match="only .safetensors"):
        ZooSource(source="zoo", factory="zoo_demo_plugin:build_affine", weights="w.pt", sha256="0" * 64)


# ============================================================================ 8. patterns at validation
@pytest.mark.parametrize("old,new,field", [
    ("id: Qwen/Qwen2.5-0.5B", "id: Qwen/Qwen2.5/../../x", "models.model.variants.full.id"),
    ("id: Qwen/Qwen2.5-0.5B", "id: 'a b/c'", "models.model.variants.full.id"),
    ("tags: [demo]", 'tags: [demo]\nrequires: {"torch; os_name == \'nt\'": ">=1"}', "requires"),
    ("tags: [demo]", 'tags: [demo]\nrequires: {torch: ">=1 or so"}', "requires.torch"),
    ("tags: [demo]", 'tags: [demo]\nrequires: {torch: "@ file:///tmp/evil"}', "requires.torch"),
])
def test_hub_ids_and_requires_are_validated_by_pattern(tmp_path: Path, old: str, new: str, field: str) -> None:
    err = _errors(_demo_with(tmp_path, old, new))
    assert f" {field}" in err and "\n" not in err.strip(), err


def test_hub_file_ids_are_validated_by_pattern() -> None:
    from registry.spec import Adapter, HubFile

    for bad in ("../../etc", "a/b/c", "a--b/c", "x" * 200, ""):
        with pytest.raises(ValueError, match="hub repository id"):
            HubFile(hub=bad, filename="m.safetensors", allow_unpinned=True)
        with pytest.raises(ValueError, match="hub repository id"):
            Adapter(hub=bad, revision=REV, sha256="0" * 64)
    HubFile(hub="owner/repo.v2_x-1", filename="m.safetensors", allow_unpinned=True)


# ============================================================================ 9. zoo new names
@pytest.mark.parametrize("name,why", [("class", "Python keyword"), ("import", "Python keyword"), ("json", "standard library"),
                                      ("os", "standard library"), ("torch", "denied"), ("transformers", "denied"),
                                      ("zoo", "the project's own"), ("registry", "the project's own"),
                                      ("zoo-specs", "the project's own")])
def test_zoo_new_refuses_names_that_shadow_packages(name: str, why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from zoo.cli import main

    assert main(["new", name, "--dir", str(tmp_path)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and why in err[0], err
    assert not list(tmp_path.iterdir())
