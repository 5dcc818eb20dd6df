"""compile-bench orchestrator: sweeps of torch.compile settings, measured eager vs compiled."""

__version__ = "0.1.0"
