"""What each engine core's plug-in says of itself: switched off (a vLLM it cannot read), and
the vLLM version it runs. Read from the records before they become steps, once per core."""

from __future__ import annotations

import logging

from stepview.engine.records.facts import StepFacts
from stepview.engine.records.vllm_versions import untested_warning
from stepview.engine.watch.watched_core import WatchedCore

log = logging.getLogger(__name__)


class PluginWord:
    """Per rank: why its plug-in switched itself off (while it is off), and whether its vLLM
    version was checked (warned about once when untested: a watch never refuses)."""

    def __init__(self) -> None:
        self.off: dict[int, str] = {}  # rank -> why its plug-in switched itself off
        self._versions_read: set[int] = set()  # ranks whose vLLM version was checked

    def read(self, core: WatchedCore, records: list[StepFacts]) -> list[StepFacts]:
        """``records`` less a plug-in's word that it switched itself off: kept in :attr:`off`
        and logged once; a record of a step clears it."""
        kept = [facts for facts in records if facts.plugin_off is None]
        if len(kept) < len(records):
            reason = next(f.plugin_off for f in reversed(records) if f.plugin_off is not None)
            if reason is not None and self.off.get(core.rank) != reason:
                log.warning("stepview: the plug-in at %s is off: %s", core.address, reason)
                self.off[core.rank] = reason
        elif kept:
            self.off.pop(core.rank, None)
        if records and core.rank not in self._versions_read:  # once: warn, never refuse
            self._versions_read.add(core.rank)
            version = records[-1].vllm_version
            warning = untested_warning(version, f"the server at {core.address}")
            if version and warning is not None:
                log.warning("stepview: %s", warning)
        return kept

    def said(self, labelled: bool) -> str | None:
        """The status bar's word of the plug-ins that are off (ranks named when ``labelled``)."""
        if not self.off:
            return None
        why = "; ".join(
            f"rank {rank}: {reason}" if labelled else reason
            for rank, reason in sorted(self.off.items())
        )
        return f"stepview's plug-in is off on this server ({why}): no per-request view"
