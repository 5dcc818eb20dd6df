"""Hydra composition and the schema check, with every error as one ConfigError line.

`compose_config` is one Hydra composition; `hydra_session` keeps Hydra initialised across many
(the planner composes once per combination of config-group choices). The schema check of a plain
container lives in config/spec.py, which needs no Hydra: `to_job_config` (a structured merge) and
`checked_config`, its fast twin for containers that came out of a composition.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.config_loader import ConfigLoader
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException, MissingConfigException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from orchestrator.config.schema import Config
from orchestrator.config.spec import omegaconf_message
from orchestrator.core.failures import ConfigError


def _conf_dir() -> Path:
    """ORCHESTRATOR_CONF if set; else conf/ beside the package (a checkout), or inside it (a wheel)."""
    if "ORCHESTRATOR_CONF" in os.environ:
        return Path(os.environ["ORCHESTRATOR_CONF"])
    package = Path(__file__).resolve().parents[1]  # orchestrator/
    checkout = package.parent / "conf"
    return checkout if checkout.is_dir() else package / "conf"


CONF_DIR = _conf_dir()

ConfigStore.instance().store(name="schema", node=Config)


def _hydra_message(e: Exception) -> str:
    """One line out of Hydra's multi-line composition errors."""
    if isinstance(e, MissingConfigException):
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        options = getattr(e, "options", None) or [ln for ln in lines[2:] if not ln.startswith("Available")]
        missing = getattr(e, "missing_cfg_file", "") or lines[0]
        group, _, name = missing.rpartition("/")
        if options and group:
            return f"{group}={name} is not an option of {group}; choose one of: {', '.join(options)}"
        return lines[0]
    cause = e.__cause__ or e.__context__
    if isinstance(cause, ConfigError):
        return str(cause)
    if isinstance(cause, OmegaConfBaseException):
        return omegaconf_message(cause)
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return " ".join(lines[:2]) if lines else type(e).__name__


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Hydra's and OmegaConf's errors as one ConfigError line."""
    try:
        yield
    except (HydraException, OmegaConfBaseException) as e:
        msg = omegaconf_message(e) if isinstance(e, OmegaConfBaseException) else _hydra_message(e)
        raise ConfigError(msg) from None


@contextmanager
def hydra_session() -> Iterator[ConfigLoader]:
    """Hydra initialised with the project's conf dir, for any number of `compose_in_session`."""
    GlobalHydra.instance().clear()
    try:
        with one_line_errors(), initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            yield GlobalHydra.instance().config_loader()
    finally:
        GlobalHydra.instance().clear()


def parse_overrides(lines: list[str], loader: ConfigLoader | None = None) -> list[Override]:
    """Hydra's override grammar; with a config loader, `glob(...)` of a group can expand."""
    parser = OverridesParser.create(config_loader=loader)
    try:
        return parser.parse_overrides(lines)
    except HydraException as e:
        why = str(e).splitlines()[0]
    for line in lines:  # name the override that does not parse, and its key
        try:
            parser.parse_overrides([line])
        except HydraException as e:
            key, _, value = line.partition("=")
            hint = " (a comma list needs a value after each comma)" if value.rstrip().endswith(",") else ""
            raise ConfigError(f"{key}: cannot parse {line!r}{hint}: {str(e).splitlines()[0]}") from None
    raise ConfigError(f"cannot parse overrides: {why}")


def compose_in_session(overrides: list[str], return_hydra_config: bool = False) -> DictConfig:
    with one_line_errors():
        return compose("config", overrides=overrides, return_hydra_config=return_hydra_config)


def compose_config(overrides: list[str], return_hydra_config: bool = False) -> DictConfig:
    """Hydra composition with the project's conf dir; errors become one ConfigError line."""
    with hydra_session():
        return compose_in_session(overrides, return_hydra_config)
