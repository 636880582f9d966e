"""Answers from the snapshots: request timelines, latency percentiles, thrash and stall alerts.

Pure analysis over :mod:`stepview.model` data (no vLLM, torch or Textual), so the driver runs
it live, a replay runs it over a trace, and the UI can call it on its history.
"""
