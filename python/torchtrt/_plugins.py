"""The plugin registry and extension libraries."""

from __future__ import annotations

import os
from dataclasses import dataclass

from . import _torchtrt


@dataclass(frozen=True)
class PluginField:
    """A field of a plugin creator's schema."""

    name: str
    type: str
    list: bool
    required: bool
    default: str | None
    doc: str


@dataclass(frozen=True)
class Plugin:
    """A registered plugin creator: its key, field schema, where it came from (``source``
    as ``torchtrtc plugins`` prints it; ``library`` is ``None`` when built in) and what its
    plugins may do beyond plugin API v1 (``capabilities``: ``"shape inputs"``,
    ``"sized outputs"``, ``"tactics"``, ``"aliased outputs"``)."""

    namespace: str
    name: str
    version: str
    fields: tuple[PluginField, ...]
    provider: str
    library: str | None
    source: str
    capabilities: tuple[str, ...] = ()


def plugins() -> list[Plugin]:
    """The plugin registry: built-in plugins and those of libraries loaded so far."""
    return [
        Plugin(
            namespace=d["namespace"], name=d["name"], version=d["version"],
            fields=tuple(PluginField(**f) for f in d["fields"]),
            provider=d["provider"], library=d["library"], source=d["source"],
            capabilities=tuple(d["capabilities"]),
        )
        for d in _torchtrt.plugins()
    ]


def load_plugins(path, *, override_converters: bool = False) -> dict:
    """Loads a plugin library (``torchtrtc --plugins``); returns what it added (``plugins``,
    ``converters``, ``torch_ops`` keys, ``provider``, ``path``). Loading the same library
    again adds nothing."""
    return _torchtrt.load_library(os.fspath(path), "--plugins", override_converters)


def load_custom_converters(path, *, override_converters: bool = False) -> dict:
    """Loads a custom-converter library (``torchtrtc --custom-converters``)."""
    return _torchtrt.load_library(os.fspath(path), "--custom-converters", override_converters)


def load_custom_torch_ops(path, *, override_converters: bool = False) -> dict:
    """Loads a custom-op library (``torchtrtc --custom-torch-ops``): its ops compile into
    plugins, and engines that use them need the library loaded where they run."""
    return _torchtrt.load_library(os.fspath(path), "--custom-torch-ops", override_converters)


def load_kernel_plugin(path) -> str:
    """Compiles a kernel-plugin spec (TOML; ``torchtrtc --kernel-plugins``) and registers
    it; returns its key. Engines built with it carry it: loading them needs no spec. The
    same spec again is a no-op."""
    return _torchtrt.load_kernel_plugin(os.fspath(path))


def allow_engine_host_code(allowed: bool = True) -> None:
    """Allows (or forbids again) loading engines that carry kernel plugins' native CPU code,
    for the whole process (``torchtrtc --allow-engine-host-code``). Forbidden by default:
    loading such an engine runs its code."""
    _torchtrt.set_engine_host_code_allowed(bool(allowed))
