"""The compare view (``--replay A --compare B``): a second app, two recorded runs side by side
on one step clock, in ``app`` (a pane per run, one set of history keys moving both, ``n`` to
the first step they scheduled differently). It shares the formatting and the theme with the
main app, not its machinery."""
