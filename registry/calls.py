"""Keyword arguments of registered callables, validated by their params models before the call: a factory's
``config`` (and ``tiny.config``), a metric check's ``check_params``, a transform's ``transform_config``. Every
problem is one :class:`registry.errors.ParamError` located at the spec field that wrote it."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from .contract import check_params_model, factory_params
from .errors import BuildError, Location, ParamError, ZooError, validation_error
from .limits import SizeError, enforce_default_caps
from .resolve import resolve
from .schema import refuse_consent_keys


def one_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` on one line (whitespace collapsed, at most ``limit`` characters of message)."""
    text = " ".join(str(exc).split()) or "(no message)"
    return f"{type(exc).__name__}: {text[:limit]}"


def factory_kwargs(factory: Any, config: Mapping[str, Any], where: Any, tiny: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``config`` validated by a registered factory's params model (:func:`factory_config`): the keyword arguments
    to call it with (only the keys the spec gave)."""
    return factory_config(factory_params(factory), config, where, tiny)


def factory_config(model_cls: Any, config: Mapping[str, Any], where: Any, tiny: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``config`` validated by a factory's params model ``model_cls``: consent keys refused, sizes without a
    declared bound held to the default caps, then the model. ``where(field)`` locates a spec field; with ``tiny`` (a
    zoo source's ``tiny.config``, merged over ``config``) a problem with one of its keys is located at
    ``tiny.config.<key>``, any other at ``config.<key>``. The build and ``zoo validate`` both call this."""
    tiny = dict(tiny or {})
    field = lambda key: f"tiny.config.{key}" if key.split(".")[0] in tiny else f"config.{key}"  # noqa: E731
    for name, values in (("config", config), ("tiny.config", tiny)):
        try:
            refuse_consent_keys(dict(values))
        except ValueError as exc:
            raise ParamError(str(exc), where(name)) from None
    _default_caps(model_cls, {**config, **tiny}, lambda f: where(field(f)))
    try:
        cfg = model_cls(**{**config, **tiny})
    except ValidationError as exc:
        raise validation_error(exc, model_cls, lambda f: where(field(f) if f else ("tiny.config" if tiny else "config"))) from None
    return {k: getattr(cfg, k) for k in cfg.model_fields_set}


def _default_caps(model_cls: Any, values: Mapping[str, Any], where: Any) -> None:
    """:func:`registry.limits.enforce_default_caps` as a located ParamError (``where(dotted key)``)."""
    try:
        enforce_default_caps(model_cls, values, "")
    except SizeError as exc:
        raise ParamError(exc.detail, where(exc.path)) from None


def validated_kwargs(model_cls: Any, values: Mapping[str, Any], where: Any, prefix: str) -> dict[str, Any]:
    """``values`` (a spec's ``check_params`` / ``transform_config``) validated by ``model_cls``: consent keys
    refused at any depth, fields without a declared bound held to :mod:`registry.limits`' caps, then the model
    (types, unknown keys, declared bounds). The keyword arguments to call with (only the keys given); a problem
    is one ParamError located at ``where("<prefix>.<key>")``."""
    try:
        refuse_consent_keys(dict(values))
    except ValueError as exc:
        raise ParamError(str(exc), where(prefix)) from None
    _default_caps(model_cls, values, lambda f: where(f"{prefix}.{f}"))
    try:
        cfg = model_cls(**values)
    except ValidationError as exc:
        raise validation_error(exc, model_cls, lambda f: where(f"{prefix}.{f}" if f else prefix)) from None
    return {k: getattr(cfg, k) for k in cfg.model_fields_set}


def procedure_params(params_cls: Any, spec_values: Mapping[str, Any], overrides: Mapping[str, Any], where: Any,
                     name: str) -> Any:
    """A procedure's ``Params`` instance from the spec's values (``params`` merged with the variant's
    ``params_by_variant``) and the caller's ``overrides``: consent keys refused, the spec's sizes without a declared
    bound held to :mod:`registry.limits`' caps, then the model. ``where(key)`` locates a spec key; a problem with a
    caller's key is located at ``parameter <key>``. The build and ``zoo validate`` both call this."""
    try:
        refuse_consent_keys(dict(spec_values))
    except ValueError as exc:
        raise ParamError(str(exc), where("")) from None
    _default_caps(params_cls, spec_values, where)  # the spec's, not the caller's
    try:
        return params_cls(**{**spec_values, **overrides})
    except ValidationError as exc:
        err = validation_error(exc, params_cls, where, set(overrides))
        if err.message.startswith("unknown parameter;"):
            err = ParamError(err.message.replace("unknown parameter;", f"unknown parameter of {name};", 1), err.location)
        raise err from None


def cli_inputs(cli_cls: Any, options: Mapping[str, str], name: str) -> Any:
    """``zoo run``'s ``--key value`` options (strings) parsed by a procedure's ``CliInputs``; a problem is one line
    naming the flag and the procedure's options. ``zoo run`` checks them before the build and parses them after it
    with this one function."""
    try:
        return cli_cls(**options)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        flag = "--" + ".".join(str(p) for p in err["loc"]).replace("_", "-")
        msg = "unknown option" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
        if err["type"] == "value_error":  # a validator's own message says what is expected
            raise ZooError(f"{flag}: {msg}") from None
        if err["type"] != "extra_forbidden" and "input" in err:
            msg += f" (got {err['input']!r})"
        fields = ", ".join("--" + f.replace("_", "-") for f in cli_cls.model_fields)
        raise ZooError(f"{flag}: {msg} (options of {name}: {fields or 'none'})") from None


def _call_model(getter: Any, fn: Any, name: str, loc: Location) -> Any:
    """``getter(fn)`` (a registered callable's params model); a signature that cannot be validated is one line."""
    try:
        return getter(fn)
    except TypeError as exc:
        raise BuildError(f"{name}: {exc}", loc) from None


def check_kwargs(fn: Any, params: Mapping[str, Any], where: Any = None) -> dict[str, Any]:
    """A metric check's ``check_params`` validated by its params model (:func:`validated_kwargs`)."""
    where = where or (lambda f: Location(None, None, None, f))
    model_cls = _call_model(check_params_model, fn, getattr(fn, "__qualname__", "metric check"), where("check_params"))
    return validated_kwargs(model_cls, params, where, "check_params")


def call_factory(target: str, config: Mapping[str, Any], sub: Any, tiny: Mapping[str, Any] | None = None) -> Any:
    """Resolve a ``source: zoo`` factory, validate its config (:func:`factory_kwargs`) and call it; a failure is one
    located line. ``sub(field)`` locates a field of the source."""
    factory = resolve(target, sub("factory"), kind="factory")
    kwargs = factory_kwargs(factory, config, sub, tiny)
    try:
        return factory(**kwargs)
    except ZooError:
        raise
    except Exception as exc:  # noqa: BLE001 - a bad config value must be one line, not a traceback
        raise BuildError(f"factory {target} failed with this config: {one_line(exc)}", sub("tiny.config" if tiny else "config")) from exc
