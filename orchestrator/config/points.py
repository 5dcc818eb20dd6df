"""The resolved configs of many sweep points for the cost of a few Hydra compositions.

Hydra splits overrides into config-group choices, which pick the defaults list, and plain key
overrides, which it applies to the composed config afterwards, in order. So the points of a sweep
that choose the same groups share one composition, and each point is that composition with its own
plain overrides applied, as Hydra applies them. A plain `key=value` on an existing leaf (the common
case) goes through Hydra once per distinct line (which converts and checks its type) and is then set
in a copy of the resolved container; anything else (`+`, `~`, dict or interpolated values, a config
that interpolates) is applied per point to a copy of the composed DictConfig.
"""

from __future__ import annotations

import copy
import re
from enum import Enum
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.config_loader import ConfigLoader
from hydra.core.override_parser.types import Override
from omegaconf import DictConfig, OmegaConf, open_dict

from orchestrator.config.compose import compose_in_session, one_line_errors, parse_overrides

Leaf = tuple[list[str], Any]
SIMPLE_KEY = re.compile(r"[\w-]+(\.[\w-]+)*")


class _Group:
    """One composition, shared by the points that choose the same config groups."""

    def __init__(self, cfg: DictConfig) -> None:
        self.cfg = cfg
        self.scratch = copy.deepcopy(cfg)  # where plain leaf overrides are tried, one line at a time
        self.exact = _interpolates(OmegaConf.to_container(cfg, resolve=False))
        with one_line_errors():
            self.base: dict = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)  # type: ignore[assignment]
        self.leaves: dict[str, Leaf | None] = {}


class PointResolver:
    """Resolved config containers of sweep points (lists of `key=value` lines) over fixed overrides."""

    def __init__(self, loader: ConfigLoader, fixed: list[str], composed: DictConfig) -> None:
        """`composed`: the fixed overrides already composed with return_hydra_config=True."""
        self.loader = loader
        self.fixed = fixed
        self._parsed: dict[str, tuple[Override, bool]] = {}
        cfg = copy.deepcopy(composed)
        with open_dict(cfg):
            del cfg["hydra"]  # what compose() does without return_hydra_config
        self._groups: dict[tuple[str, ...], _Group] = {(): _Group(cfg)}

    def _parse(self, line: str) -> tuple[Override, bool]:
        """The parsed line, and whether Hydra composes it (a group choice, a hydra key)."""
        if line not in self._parsed:
            (o,) = parse_overrides([line], self.loader)
            repo = self.loader.repository  # type: ignore[attr-defined]
            composed = o.is_hydra_override() or (
                not isinstance(o.value(), dict) and repo.group_exists(o.key_or_group)
            )
            self._parsed[line] = (o, composed)
        return self._parsed[line]

    def axes(self, lines: list[str]) -> dict[str, Any]:
        """The point's axis values by key (for tables)."""
        parsed = (self._parse(line)[0] for line in lines)
        return {o.get_key_element().lstrip("+~"): _copy(o.value()) for o in parsed}

    def container(self, lines: list[str]) -> dict[str, Any]:
        """The point's config, resolved, as plain containers: what compose(fixed + lines) gives."""
        parsed = [self._parse(line) for line in lines]
        group = self._group(
            tuple(line for line, (_, composed) in zip(lines, parsed, strict=True) if composed)
        )
        plain = [o for o, composed in parsed if not composed]
        leaves = [] if group.exact else [self._leaf(group, o) for o in plain]
        if group.exact or any(leaf is None for leaf in leaves):
            cfg = copy.deepcopy(group.cfg)
            with one_line_errors():
                ConfigLoaderImpl._apply_overrides_to_config(plain, cfg)
                return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)  # type: ignore[return-value]
        container = _copy(group.base)
        for path, value in leaves:  # type: ignore[misc]
            node = container
            for part in path[:-1]:
                node = node[part]
            node[path[-1]] = _copy(value)
        return container

    def _group(self, lines: tuple[str, ...]) -> _Group:
        if lines not in self._groups:
            self._groups[lines] = _Group(compose_in_session(self.fixed + list(lines)))
        return self._groups[lines]

    def _leaf(self, group: _Group, o: Override) -> Leaf | None:
        """(path, value) of a plain `key=value` on an existing leaf, typed by Hydra; None otherwise."""
        line = o.input_line or ""
        if line in group.leaves:
            return group.leaves[line]
        value, key = o.value(), o.key_or_group
        leaf: Leaf | None = None
        simple = not (o.is_add() or o.is_delete() or o.is_force_add() or o.package is not None)
        simple = simple and not isinstance(value, dict | list) and "${" not in str(value)
        if simple and SIMPLE_KEY.fullmatch(key):
            parent_key, _, name = key.rpartition(".")
            parent = OmegaConf.select(group.scratch, parent_key) if parent_key else group.scratch
            if (
                isinstance(parent, DictConfig)
                and name in parent
                and not OmegaConf.is_interpolation(parent, name)
                and not OmegaConf.is_config(parent[name])
            ):
                with one_line_errors():
                    ConfigLoaderImpl._apply_overrides_to_config([o], group.scratch)
                typed = parent[name]  # a choice field gives its StrEnum member: keep the plain string
                leaf = (key.split("."), typed.value if isinstance(typed, Enum) else typed)
        group.leaves[line] = leaf
        return leaf


def _copy(value: Any) -> Any:
    """A deep copy of plain containers (JSON-like), much cheaper than copy.deepcopy."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _interpolates(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_interpolates(v) for v in value.values())
    if isinstance(value, list):
        return any(_interpolates(v) for v in value)
    return isinstance(value, str) and "${" in value
