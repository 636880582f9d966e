"""How a watch's link to a server reads to the user: what each engine core's plug-in says of
itself (switched off, the vLLM it runs), and the state and status-bar line the driver shows for
an :class:`~stepview.engine.watch.link.attached.AttachedEngine` (waiting for the first records,
or the rest of a full record sent in parts, disconnected with requests held, behind and
catching up, a plug-in that is off).

Apart from the reading of records: it is only words about them. The plug-ins' word is read
from the records before they become steps, once per core; the link's line is asked for by the
driver between steps, reads the engine cores and changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from stepview.engine.records.channel import ChannelState
from stepview.engine.records.facts import StepFacts
from stepview.engine.records.vllm_versions import untested_warning
from stepview.engine.watch.link.watched_core import WatchedCore
from stepview.model.engine_api import LinkState
from stepview.model.snapshot import EngineState

log = logging.getLogger(__name__)

# A view this many seconds behind the server says so in the status bar.
BEHIND_SHOWN_S = 2.0


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


def link_state(
    address: str,
    cores: Sequence[WatchedCore],
    *,
    labelled: bool,
    backlog: bool,
    plugins: PluginWord,
) -> LinkState:
    """The link of a watch of ``cores`` at ``address`` (``labelled``: ranks are named;
    ``backlog``: records wait to be read, so the view is behind by more than delivery)."""
    ranks = tuple(core.status for core in cores) if labelled else ()
    states = [core.subscriber.state for core in cores]
    unseen = sum(core.unseen for core in cores)
    if all(state is ChannelState.CONNECTING for state in states):
        refusal = next((c.subscriber.refusal for c in cores if c.subscriber.refusal), None)
        return LinkState(
            EngineState.STARTING,
            refusal
            or f"waiting for the server's records at {address} (started with "
            f"STEPVIEW_PUBLISH={address} and stepview's --scheduler-cls?)",
            ranks,
        )
    lost = [
        c for c, state in zip(cores, states, strict=True) if state is not ChannelState.CONNECTED
    ]
    if lost:
        where = ", ".join(f"rank {c.rank} at {c.address}" if labelled else c.address for c in lost)
        held = sum(len(c.samples) for c in lost)
        also = f"; {held} held as they were" if held else ""
        message = f"DISCONNECTED from {where} — reconnecting{also}"
        return LinkState(EngineState.DISCONNECTED, message, ranks, unseen=unseen)
    busy = any(core.busy for core in cores)
    coming = sum(core.stream.to_come for core in cores)  # a full record in parts, under way
    message = f"receiving the server's full picture: {coming} requests to come" if coming else ""
    behind = 0.0
    if backlog:  # nothing waiting to be read: the view is as late as delivery
        behind = max(core.behind for core in cores)
        if behind >= BEHIND_SHOWN_S:
            message = f"view {behind:.0f} s behind the server, catching up"
            if unseen:  # the TUI's only word of it (headless: LinkNotices)
                message += f"; {unseen} requests came and went unseen"
    state = EngineState.RUNNING if busy else EngineState.IDLE
    off = plugins.said(labelled)
    if off is not None:
        message = f"{off}; {message}" if message else off
    return LinkState(state, message, ranks, behind, unseen)
