"""Building: every CPU variant builds (a non-runnable one is SKIP with its status, never PASS), and every
hub-loaded role (usually the paper's ``full`` checkpoints) is loaded through the same builder from a tiny checkpoint
saved locally (``save_pretrained``; a hub *file* role: the factory's random state dict through the converter's
inverse), so the loading path is tested with no network."""
from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..catalog import Entry
from ..errors import ParamError
from ..spec import HubFile, HubSource, TimmSource, ZooSource
from .base import Check, Skipped, SpecUnderCheck, family


@family
def builds_and_loading_paths(s: SpecUnderCheck) -> list[Check]:
    spec, file, entry = s.spec, s.file, s.entry
    checks: list[Check] = []
    for v in s.cpu:

        def builds(v: str = v) -> None:
            refusal = spec.hardware[v].refusal(v)
            if refusal:
                raise Skipped(refusal)
            s.pipeline(v)

        checks.append(s.check(f"builds[{v}]", builds))

    for role, model in spec.models.items():
        for v, src in model.variants.items():
            if isinstance(src, HubSource) or (isinstance(src, TimmSource) and src.weights is None):

                def loading_path(src: Any = src, role: str = role, v: str = v) -> None:
                    from ..build import build_model
                    from ..loader import locate

                    if isinstance(src, HubSource) and src.tiny is None and spec.hardware[v].status == "declared-only":
                        raise Skipped(str(spec.hardware[v].refusal(v)) + "; no tiny: block to test its loading path")
                    # The harness never consents on the spec's behalf: a remote-code role is built
                    # (from a code-free tiny checkpoint, the "stub") only if the caller said so.
                    needs_code = bool(getattr(src, "trust_remote_code", False))
                    if needs_code and not s.allow_remote_code_stub:
                        raise Skipped("needs remote code; checked on a code-free stub only with "
                                      "`zoo check --allow-remote-code-stub` (the caller's consent)")
                    with tempfile.TemporaryDirectory() as tmp:
                        tiny = _tiny_checkpoint(src, Path(tmp))
                        obj = build_model(tiny, spec_dir=entry.path.parent, device="cpu",
                                          trust_remote_code=needs_code and s.allow_remote_code_stub,
                                          loc=locate(file, f"models.{role}.variants.{v}"), allow_outside_paths=True)
                        assert obj is not None
                        if hasattr(obj, "parameters"):
                            assert sum(p.numel() for p in obj.parameters()) > 0, "loaded model has no parameters"

                checks.append(s.check(f"loading-path[{role}.{v}]", loading_path))
            elif isinstance(src, ZooSource) and isinstance(src.weights, HubFile):

                def hub_file_path(src: ZooSource = src, role: str = role, v: str = v) -> None:
                    field = f"models.{role}.variants.{v}"
                    if src.tiny_config is None and spec.hardware[v].status == "declared-only":
                        # a declared-only role may be paper-sized (building it here would cost minutes)
                        raise Skipped(
                            f"{spec.hardware[v].refusal(v)}; its hub-file loading path is not built at the paper's size: add "
                            f"`tiny_config: {{...}}` to {field} (factory config overrides, merged over `config`, that give a "
                            f"tiny model with the same keys and converter, e.g. fewer layers, a smaller width) to check it offline")
                    _check_hub_file_loading_path(entry, src, field)

                checks.append(s.check(f"loading-path[{role}.{v}]", hub_file_path))
    return checks


# ----------------------------------------------------------------------------- tiny checkpoints
def _tiny_checkpoint(source: HubSource | TimmSource, workdir: Path) -> Any:
    """Save a tiny model of the same type locally and return the source pointing at it."""
    if isinstance(source, TimmSource):
        import timm
        from safetensors.torch import save_file

        from ..build import sha256_file

        model = timm.create_model(source.model_name, pretrained=False, **source.kwargs)
        path = workdir / "tiny.safetensors"
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
        return source.model_copy(update={"weights": str(path), "sha256": sha256_file(path)})
    if source.tiny is None:
        raise AssertionError(
            f"{source.id}: no `tiny:` block, so the loading path cannot be tested offline; add tiny.config"
        )
    from ..resolve import library_class

    from ..spec import refuse_code_keys

    cfg = dict(refuse_code_keys(dict(source.tiny.config)))  # again here: the harness never writes code keys
    target = workdir / "tiny"
    save_dir = target / source.subfolder if source.subfolder else target
    from ..build import _is_model_class

    cls = library_class(source.source, source.tiny.model_class or source.model_class)
    if not _is_model_class(cls):  # a tokenizer, processor, feature extractor or scheduler
        _tiny_preprocessor(source.source, cls, cfg).save_pretrained(str(save_dir))
        return source.model_copy(update={"id": str(target), "revision": None, "allow_unpinned": True})
    if source.source == "transformers":
        import transformers

        model_type = cfg.pop("model_type", None)
        if model_type is None:
            raise AssertionError(f"{source.id}: tiny.config needs model_type")
        config = transformers.AutoConfig.for_model(model_type, **cfg)
        cls = library_class("transformers", source.tiny.model_class or source.model_class)
        make = (lambda: cls.from_config(config)) if hasattr(cls, "from_config") else (lambda: cls(config))
    else:
        cls = library_class("diffusers", source.tiny.model_class or source.model_class)
        make = (lambda: cls.from_config(cfg)) if hasattr(cls, "from_config") else (lambda: cls(**cfg))
    _check_tiny_size(make)
    model = make()
    model.save_pretrained(str(save_dir))
    update: dict[str, Any] = {"id": str(target), "revision": None, "allow_unpinned": True}
    if source.adapters:
        update["adapters"] = _tiny_adapters(model, source, workdir)
    return source.model_copy(update=update)

def _check_tiny_size(make: Callable[[], Any]) -> None:
    """Count the parameters of the tiny model ``make()`` builds on the meta device (nothing allocated) and
    refuse it over :data:`registry.limits.TINY_PARAMS`: each ``tiny.config`` integer is capped, their product
    is capped here. A class that cannot be built on the meta device is left to its capped integers."""
    import torch

    from ..errors import Location
    from ..limits import TINY_PARAMS, SizeError

    try:
        with torch.device("meta"):
            model = make()
    except Exception:  # noqa: BLE001 - the real build reports its own error
        return
    n = sum(p.numel() for p in model.parameters()) if hasattr(model, "parameters") else 0
    try:
        TINY_PARAMS.check(n, "tiny.config", " parameters")
    except SizeError as exc:
        raise ParamError(exc.detail, Location(None, None, None, exc.path)) from None

def _tiny_adapters(model: Any, source: HubSource, workdir: Path) -> list[Any]:
    """A random LoRA per declared adapter (peft's default target modules for a transformers model type;
    every linear layer of a diffusers model, which has no model type peft knows), saved locally under
    the declared file name; the adapters then load through the same call."""
    import peft

    from ..weights import sha256_file

    targets = "all-linear" if source.source == "diffusers" else None
    out = []
    for i, adapter in enumerate(source.adapters):
        folder = workdir / f"adapter-{i}"
        lora = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=targets, init_lora_weights=False))
        lora.save_pretrained(str(folder))
        model = lora.unload()
        saved = folder / "adapter_model.safetensors"
        if adapter.weight_name != saved.name:
            saved = saved.rename(folder / adapter.weight_name)
        out.append(adapter.model_copy(update={"hub": None, "revision": None, "path": str(folder), "sha256": sha256_file(saved)}))
    return out

def tiny_tokenizer(vocab: list[str] | None = None, **special: str) -> Any:
    """A small word-level fast tokenizer built with the ``tokenizers`` package (no files, no network)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = {"unk_token": "[UNK]", "pad_token": "[PAD]", **special}
    words = list(dict.fromkeys([*specials.values(), *(vocab or ["the", "a", "model", "zoo", "token"])]))
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token=specials["unk_token"]))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, **specials)

def _tiny_preprocessor(library: str, cls: type, cfg: dict[str, Any]) -> Any:
    """A tiny tokenizer / processor / scheduler of the declared class, from ``tiny.config``
    (tokenizers: ``vocab`` and special tokens; others: the class's keyword arguments)."""
    name = cls.__name__
    if "Tokenizer" in name:
        return tiny_tokenizer(cfg.pop("vocab", None), **cfg)  # saved as tokenizer.json, which every fast class reads
    if name.startswith("Auto"):
        raise AssertionError(f"tiny.model_class: name the concrete class {name} should load (e.g. ViTImageProcessor)")
    return cls(**cfg)

def _check_hub_file_loading_path(entry: Entry, src: ZooSource, field: str) -> None:
    """A hub-file role's loading path, offline: the factory's random state dict (at ``config``, or at
    ``tiny_config`` merged over it when the role has one), mapped back by the converter's inverse
    (identity without a converter), saved under the same file name in a temp folder, then read,
    verified, converted and loaded by the same code as the real file.

    Every floating-point parameter is first moved off its init by seeded noise, so tensors the factory
    initialises identically (norm scales of ones, zero biases) are told apart: an inverse that swaps
    two of them fails. Every tensor must come back as saved, or, for one the converter fills itself
    (a release without it: new heads, norms), equal to the factory's own init."""
    import torch

    from ..build import build_model, call_factory
    from ..loader import locate
    from ..weights import inverse_converter, save_state, sha256_file

    assert isinstance(src.weights, HubFile)
    file = str(entry.path)
    sub = lambda name: locate(file, f"{field}.{name}")  # noqa: E731
    reference = call_factory(src.factory, src.config, sub, src.tiny_config)
    init = {k: v.detach().clone() for k, v in reference.state_dict().items()}
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in reference.parameters():  # unique parameters: tied ones stay tied
            if param.is_floating_point():
                param.add_(torch.randn(param.shape, generator=gen, dtype=torch.float32).to(param.device, param.dtype))
    state = {k: v.detach().clone() for k, v in reference.state_dict().items()}
    raw = inverse_converter(src.convert, sub("convert"))(state)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / src.weights.filename
        path.parent.mkdir(parents=True, exist_ok=True)
        save_state(raw, path)
        # dtype: None: the round trip checks the converter and key layout; a role's storage dtype
        # (bf16) would round the seeded noise and hide nothing about the layout
        local = src.model_copy(update={"weights": src.weights.model_copy(update={"sha256": sha256_file(path)}),
                                       "config": src.tiny_factory_config(), "tiny_config": None, "dtype": None})
        built = build_model(local, spec_dir=entry.path.parent, device="cpu", loc=locate(file, field),
                            hub_file_at=path)  # the harness's own temp file, read as the hub file would be
    got = built.state_dict()

    def same(a: Any, b: Any) -> bool:
        return a.shape == b.shape and bool((a.to(b.dtype) == b).all())

    for k, v in state.items():
        if k not in got or not (same(got[k], v) or same(got[k], init[k])):
            raise AssertionError(f"{field}: {k} does not survive the save -> convert -> load round trip")
