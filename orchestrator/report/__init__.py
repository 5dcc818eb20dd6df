"""The dashboard: one self-contained HTML page per sweep (plotly inlined; no server, no network)."""

from orchestrator.report.dashboard import DASHBOARD_FILE, write_dashboard

__all__ = ["DASHBOARD_FILE", "write_dashboard"]
