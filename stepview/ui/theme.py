"""The one theme of every stepview app: the live/replay app and the compare view.

``ansi-dark`` takes the terminal's own palette, which tmux and ssh draw faithfully (true-colour
themes and alpha blends they cannot). An app using it also passes ``ansi_color=True`` to
``App.__init__``: said up front, ``NO_COLOR`` drops colour codes instead of putting a
monochrome filter over ANSI colours (which drew black on black).
"""

from __future__ import annotations

THEME = "ansi-dark"
