"""The footer of every screen: compact, and fitted to the terminal's width.

Textual's footer cuts off whatever does not fit, so the keys at the end of the row (help,
quit) were the first to go on a narrow terminal. This one leaves out the keys of
:data:`~stepview.ui.bindings.FOOTER_DROP_ORDER`, in that order, until the row fits: at 100
columns a live run shows every key, at 80 the ones a newcomer can do without (all of them
are on the help screen). Their keys work either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from stepview.ui.bindings import FOOTER_DROP_ORDER


def key_width(key: FooterKey) -> int:
    """Columns a compact footer key takes: ``k Label`` and one column of margin."""
    return cell_len(key.key_display) + 1 + cell_len(key.description) + 1


def fitted(widgets: Iterable[Widget], width: int) -> Iterator[Widget]:
    """``widgets`` without the keys of :data:`FOOTER_DROP_ORDER` that do not fit ``width``."""
    kept = list(widgets)
    for action in FOOTER_DROP_ORDER:
        used = sum(key_width(w) for w in kept if isinstance(w, FooterKey))
        if used <= width:
            break
        kept = [w for w in kept if not (isinstance(w, FooterKey) and w.action == action)]
    return iter(kept)


class FittingFooter(Footer):
    """A compact :class:`Footer` that leaves out its least needed keys when too narrow."""

    # The space between key and label is the key's, not the label's: SVG renderers such as
    # librsvg drop the leading space of a text run, which drew "aAdd" in screenshots.
    DEFAULT_CSS = """
    FittingFooter FooterKey.-compact {
        .footer-key--key { padding: 0 1 0 0; }
        .footer-key--description { padding: 0; }
    }
    """

    def __init__(self) -> None:
        super().__init__(compact=True)
        self._fitted_to = 0

    def compose(self) -> ComposeResult:
        self._fitted_to = self.app.size.width
        yield from fitted(super().compose(), self._fitted_to)

    def on_resize(self, event: events.Resize) -> None:
        if self.app.size.width != self._fitted_to:
            self.call_after_refresh(self.recompose)
