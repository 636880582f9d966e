"""Text that stepview did not write, handed to Textual so that it is shown as written.

Textual reads a ``str`` as markup in most places: a ``DataTable`` cell, ``Static(str)`` and
``update(str)``, a border title, a toast. Text from another party — a request id a client
chose, a trace someone sent (its file name, its notes), a server's listing and error texts,
what the user typed into a form or a filter — would then be obeyed: ``[reverse]`` styles it,
``[@click=app.quit]`` makes it a link that runs one of the app's actions, and a tag that
does not parse (``evil[/x]``, ``[link=http://e]``) raises ``MarkupError`` and ends the app.

So such text reaches Textual only through this module, in one of three forms, each made safe
of control characters as :func:`~stepview.ui.display.one_line` and
:func:`~stepview.ui.display.multi_line` say (Textual passes ESC through to the terminal):

* :func:`literal`: one line as a Rich :class:`~rich.text.Text`, which Textual never parses:
  a table cell, a border title;
* :class:`PlainStatic`: a block of lines, for a widget that shows one (its ``str`` is never
  markup);
* :class:`PlainTextApp`: the base of stepview's apps, whose toasts are never markup. What a
  toast says is often another party's (a request id, a trace's note, a server that joined),
  and Textual takes a toast only as a ``str``: the one rule is the app's, not each call's.

stepview's own words may stay markup where they are written as such; mixing them with
outside text means assembling :class:`~rich.text.Text` or
:class:`~textual.content.Content` parts, never formatting both into one ``str``.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ReturnType
from textual.notifications import SeverityLevel
from textual.visual import VisualType
from textual.widgets import Static

from stepview.ui.display import multi_line, one_line


def literal(text: str, style: str = "", *, limit: int | None = None) -> Text:
    """``text`` as one line that Textual shows as written (``limit``: as in ``one_line``)."""
    return Text(one_line(text, limit), style=style, end="")


class PlainStatic(Static):
    """A :class:`Static` whose ``str`` is shown as written: never markup, control characters
    made safe (:func:`~stepview.ui.display.multi_line`, so line breaks stay)."""

    def __init__(
        self, content: str = "", *, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(multi_line(content), markup=False, id=id, classes=classes)

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        super().update(multi_line(content) if isinstance(content, str) else content, layout=layout)


class PlainTextApp(App[ReturnType]):
    """An app whose toasts show their text as written (see the module docstring)."""

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Textual's ``notify``, with ``markup`` ignored: no toast of stepview's is markup, and
        a screen's ``notify`` passes ``markup=True`` on its own."""
        super().notify(
            multi_line(message),
            title=one_line(title),
            severity=severity,
            timeout=timeout,
            markup=False,
        )
