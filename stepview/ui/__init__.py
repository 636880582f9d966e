"""The Textual UI. Imports Textual, never vLLM: it reads snapshots from a SnapshotSource."""

from stepview.ui.app import StepviewApp

__all__ = ["StepviewApp"]
