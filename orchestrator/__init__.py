"""compile-bench orchestrator: sweeps of torch.compile settings, measured eager vs compiled."""

import os
from pathlib import Path

__version__ = "0.1.0"

# Installed from a wheel, conf/ is shipped inside the package (orchestrator/conf) rather than beside
# it as in a checkout: tell the config loader (ORCHESTRATOR_CONF, read by orchestrator.plan).
_shipped = Path(__file__).resolve().parent / "conf"
if (
    "ORCHESTRATOR_CONF" not in os.environ
    and not (_shipped.parent.parent / "conf").is_dir()
    and _shipped.is_dir()
):
    os.environ["ORCHESTRATOR_CONF"] = str(_shipped)
