"""Source kind ``transformers`` / ``diffusers``: a model role (or tokenizer, processor, scheduler) loaded with the
library's ``from_pretrained`` from a pinned hub revision in the local HF cache or a local folder, with PEFT adapters;
conformance loads a tiny checkpoint made from ``tiny.config`` through the same code."""
from __future__ import annotations

import inspect
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from .. import hub
from ..calls import one_line
from ..errors import BuildError, Location, ParamError, Skipped
from ..files import check_folder_links, local_path
from ..hardware import offline
from ..limits import TINY_PARAMS, SizeError
from ..resolve import library_class
from ..schema import REVISION_RE, Adapter, DType, TinyCheckpoint, is_hub_id, looks_remote, refuse_code_keys
from ..weights import hub_file_cached, load_adapters, sha256_file, snapshot_cached
from .base import BuildRequest, LintRequest, LoadingPathRequest, SaveRequest, SourceKind, is_model_class, place, register


@register
class HubSource(SourceKind):
    """A model role loaded with ``from_pretrained`` from transformers or diffusers
    (also tokenizers and processors: ``model_class: AutoTokenizer``)."""

    doc_example: ClassVar[str] = """
lm: {source: transformers, model_class: AutoModelForCausalLM, id: Qwen/Qwen2.5-0.5B, revision: <40-hex>,
     tiny: {config: {model_type: qwen2, hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2,
                     num_key_value_heads: 1, intermediate_size: 32, vocab_size: 64}},
     transform: "my_plugin.patch:install_processors", transform_config: {kind: flash}}
tokenizer: {source: transformers, model_class: AutoTokenizer, id: Qwen/Qwen2.5-0.5B, revision: <40-hex>,
            tiny: {config: {vocab: [the, zoo, model]}}}   # a word-level tokenizer for the offline check
"""

    source: Literal["transformers", "diffusers"]
    model_class: str = Field(description="class in the library, e.g. AutoModelForCausalLM, UNet2DModel")
    id: str | None = Field(
        None, description="hub id (needs revision, with or without an org) or a local directory starting with ./, ../, / or ~ "
        "(relative paths resolve against the spec's folder and must stay inside it)"
    )
    revision: str | None = Field(None, pattern=REVISION_RE, description="pinned 40-hex commit of a hub id")
    allow_unpinned: bool = False
    subfolder: str | None = None
    dtype: DType | None = None
    trust_remote_code: bool = False
    tiny: TinyCheckpoint | None = None
    adapters: list[Adapter] = Field([], description="PEFT adapters loaded onto the model, in order")

    path_fields: ClassVar[tuple[str, ...]] = ("id", "adapters")

    @model_validator(mode="after")
    def _pinned(self) -> "HubSource":
        if self.id is None:
            raise ValueError("id: a hub id or a local directory is required")
        if looks_remote(self.id) and not is_hub_id(self.id):
            raise ValueError(f"id: {self.id[:100]!r} is neither a hub repository id (owner/name) nor a local folder "
                             "(./x, ../x, /x or ~/x)")
        if looks_remote(self.id) and self.revision is None and not self.allow_unpinned:
            raise ValueError(f"revision: hub id {self.id!r} needs a pinned 40-hex revision (or allow_unpinned: true)")
        return self

    # ------------------------------------------------------------------ build
    def build(self, req: BuildRequest) -> Any:
        """``from_pretrained`` of ``model_class`` from the HF cache at the pinned revision (a hub id) or a local folder
        inside the spec's tree; PEFT adapters, the transform, then placement (models only; a multi-GPU role keeps its
        ``device_map``)."""
        cls = library_class(self.source, self.model_class, req.loc)
        if self.trust_remote_code and not req.trust_remote_code:
            raise BuildError(f"{self.id} needs remote code: pass trust_remote_code=True (the spec allows it; you must too)", req.loc)
        if self.trust_remote_code and hub.remote_code_disabled():
            raise BuildError(f"{self.id} needs remote code, which ZOO_DISABLE_REMOTE_CODE forbids", req.loc)
        kwargs: dict[str, Any] = {}
        if looks_remote(self.id or ""):  # a hub id: the HF cache at its revision, never a folder of that name here
            if not hub.is_hub_id(self.id or ""):
                raise BuildError(f"{self.id!r} is not a hub repository id (owner/name)", req.sub("id"))
            try:
                ref: Any = hub.snapshot(self.id or "", self.revision, subfolder=self.subfolder)
            except Exception as exc:  # noqa: BLE001 - LocalEntryNotFoundError, HfHubHTTPError, ...: one line
                at = f"{self.id}@{self.revision[:12] if self.revision else '(unpinned)'}"
                if offline():
                    raise BuildError(f"{at} is not in the local HF cache (offline: HF_HUB_OFFLINE is set)", req.sub("id")) from None
                raise BuildError(f"could not fetch {at}: {one_line(exc)}", req.sub("id")) from None
        else:
            ref = local_path(self.id or "", req.spec_dir, req.sub("id"), req.allow_outside_paths, "local model")
            check_folder_links(ref, req.spec_dir, req.sub("id"), req.allow_outside_paths, "local model")
        if self.subfolder:
            kwargs["subfolder"] = self.subfolder
        is_model = is_model_class(cls)
        if req.dtype is not None and is_model:
            params = inspect.signature(cls.from_pretrained).parameters
            kwargs["torch_dtype" if self.source == "diffusers" and "dtype" not in params else "dtype"] = req.dtype
        if req.multi_gpu and is_model:
            kwargs["device_map"] = "auto"
        try:
            model = hub.load_pretrained(cls, ref, trust_remote_code=bool(self.trust_remote_code and req.trust_remote_code), **kwargs)
        except Exception as exc:  # noqa: BLE001 - OSError, ValueError, SafetensorError, ...: one line
            msg = " ".join(str(exc).split())[:300]
            where = "offline (HF_HUB_OFFLINE is set) " if offline() else ""
            raise BuildError(f"could not load {self.id} {where}with {self.model_class}: {msg}", req.loc) from None
        if self.adapters:
            model = load_adapters(model, list(self.adapters), self.source, req.spec_dir, req.loc, req.allow_outside_paths)
        model = req.transform(model)
        return model if (req.multi_gpu or not is_model) else place(model, req.device, None)

    def missing_offline(self, spec_dir: Path) -> str | None:
        if looks_remote(self.id or ""):  # a hub id is only ever looked up in the HF cache (never as a folder)
            if not snapshot_cached(self.id or "", self.revision):
                return f"{self.id}" + (f"@{self.revision[:12]}" if self.revision else "")
        for a in self.adapters:
            if a.hub is not None and not hub_file_cached(a.hub, a.revision, a.weight_name):
                return f"adapter {a.hub}"
        return None

    # ------------------------------------------------------------------ zoo validate
    def lint(self, req: LintRequest) -> None:
        known = req.library_has(self.source, self.model_class)
        if known is not None and not known[0]:
            hint = f"; did you mean {known[1][0]!r}?" if known[1] else ""
            req.problem(f"{req.field}.model_class", f"{self.source} has no class {self.model_class!r}{hint}")

    # ------------------------------------------------------------------ conformance
    def loading_path_check(self, req: LoadingPathRequest) -> Callable[[], None]:
        def check() -> None:
            if self.tiny is None and req.declared_only is not None:
                raise Skipped(req.declared_only + "; no tiny: block to test its loading path")
            # The harness never consents on the spec's behalf: a remote-code role is built (from a code-free
            # tiny checkpoint, the "stub") only if the caller said so.
            if self.trust_remote_code and not req.allow_remote_code_stub:
                raise Skipped("needs remote code; checked on a code-free stub only with "
                              "`zoo check --allow-remote-code-stub` (the caller's consent)")
            built_from_tiny(self, req, trust_remote_code=self.trust_remote_code and req.allow_remote_code_stub)

        return check

    def tiny_checkpoint(self, workdir: Path) -> "HubSource":
        """Save a tiny model (or tokenizer, processor, scheduler) of the same class locally from ``tiny.config``
        and return this source pointing at it (adapters: a random LoRA each, saved under the declared name)."""
        if self.tiny is None:
            raise AssertionError(f"{self.id}: no `tiny:` block, so the loading path cannot be tested offline; add tiny.config")
        cfg = dict(refuse_code_keys(dict(self.tiny.config)))  # again here: the harness never writes code keys
        target = workdir / "tiny"
        save_dir = target / self.subfolder if self.subfolder else target
        cls = library_class(self.source, self.tiny.model_class or self.model_class)
        if not is_model_class(cls):  # a tokenizer, processor, feature extractor or scheduler
            _tiny_preprocessor(cls, cfg).save_pretrained(str(save_dir))
            return self.model_copy(update={"id": str(target), "revision": None, "allow_unpinned": True})
        if self.source == "transformers":
            import transformers  # heavy library: imported only when a tiny checkpoint is made

            model_type = cfg.pop("model_type", None)
            if model_type is None:
                raise AssertionError(f"{self.id}: tiny.config needs model_type")
            config = transformers.AutoConfig.for_model(model_type, **cfg)
            make = (lambda: cls.from_config(config)) if hasattr(cls, "from_config") else (lambda: cls(config))
        else:
            make = (lambda: cls.from_config(cfg)) if hasattr(cls, "from_config") else (lambda: cls(**cfg))
        check_tiny_size(make)
        model = make()
        model.save_pretrained(str(save_dir))
        update: dict[str, Any] = {"id": str(target), "revision": None, "allow_unpinned": True}
        if self.adapters:
            update["adapters"] = self._tiny_adapters(model, workdir)
        return self.model_copy(update=update)

    def _tiny_adapters(self, model: Any, workdir: Path) -> list[Any]:
        """A random LoRA per declared adapter (peft's default target modules for a transformers model type;
        every linear layer of a diffusers model, which has no model type peft knows), saved locally under
        the declared file name; the adapters then load through the same call."""
        import peft  # heavy library: imported only for a role with adapters

        targets = "all-linear" if self.source == "diffusers" else None
        out = []
        for i, adapter in enumerate(self.adapters):
            folder = workdir / f"adapter-{i}"
            lora = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=targets, init_lora_weights=False))
            lora.save_pretrained(str(folder))
            model = lora.unload()
            saved = folder / "adapter_model.safetensors"
            if adapter.weight_name != saved.name:
                saved = saved.rename(folder / adapter.weight_name)
            out.append(adapter.model_copy(update={"hub": None, "revision": None, "path": str(folder), "sha256": sha256_file(saved)}))
        return out

    # ------------------------------------------------------------------ save_pretrained
    def saved(self, req: SaveRequest) -> dict[str, Any]:
        where = Location(field=f"models.{req.role}")
        if req.replacement is not None:
            raise ParamError(f"role {req.role!r} is loaded with from_pretrained; replace takes factory-built or timm roles only",
                             Location(field="replace"))
        if self.trust_remote_code:
            raise BuildError(f"role {req.role!r} runs the model repository's code (trust_remote_code); a saved pipeline holds no code", where)
        if self.adapters:
            raise BuildError(f"role {req.role!r} carries peft adapters, which save_pretrained does not write yet; "
                             "merge them into the model first", where)
        if not callable(getattr(req.obj, "save_pretrained", None)):
            raise BuildError(f"role {req.role!r} ({type(req.obj).__name__}) has no save_pretrained", where)
        req.obj.save_pretrained(str(req.folder / "models" / req.role))
        out: dict[str, Any] = {"source": self.source, "model_class": self.model_class, "id": f"./models/{req.role}"}
        dtype = req.float_dtype(req.obj)
        if dtype is not None:
            out["dtype"] = dtype
        return {**out, **req.keep}


def built_from_tiny(source: Any, req: LoadingPathRequest, trust_remote_code: bool = False) -> None:
    """Build ``source.tiny_checkpoint(tmp)`` through the real builder and check it has parameters (a model)."""
    with tempfile.TemporaryDirectory() as tmp:
        tiny = source.tiny_checkpoint(Path(tmp))
        obj = req.build_model(tiny, spec_dir=req.spec_dir, device="cpu", trust_remote_code=trust_remote_code,
                              loc=req.loc, allow_outside_paths=True)  # the harness's own temp folder
        assert obj is not None
        if hasattr(obj, "parameters"):
            assert sum(p.numel() for p in obj.parameters()) > 0, "loaded model has no parameters"


def check_tiny_size(make: Callable[[], Any]) -> None:
    """Count the parameters of the tiny model ``make()`` builds on the meta device (nothing allocated) and
    refuse it over :data:`registry.limits.TINY_PARAMS`: each ``tiny.config`` integer is capped, their product
    is capped here. A class that cannot be built on the meta device is left to its capped integers."""
    import torch  # heavy library

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


def tiny_tokenizer(vocab: list[str] | None = None, **special: str) -> Any:
    """A small word-level fast tokenizer built with the ``tokenizers`` package (no files, no network)."""
    from tokenizers import Tokenizer, models, pre_tokenizers  # heavy libraries
    from transformers import PreTrainedTokenizerFast

    specials = {"unk_token": "[UNK]", "pad_token": "[PAD]", **special}
    words = list(dict.fromkeys([*specials.values(), *(vocab or ["the", "a", "model", "zoo", "token"])]))
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token=specials["unk_token"]))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, **specials)


def _tiny_preprocessor(cls: type, cfg: dict[str, Any]) -> Any:
    """A tiny tokenizer / processor / scheduler of the declared class, from ``tiny.config``
    (tokenizers: ``vocab`` and special tokens; others: the class's keyword arguments)."""
    name = cls.__name__
    if "Tokenizer" in name:
        return tiny_tokenizer(cfg.pop("vocab", None), **cfg)  # saved as tokenizer.json, which every fast class reads
    if name.startswith("Auto"):
        raise AssertionError(f"tiny.model_class: name the concrete class {name} should load (e.g. ViTImageProcessor)")
    return cls(**cfg)
