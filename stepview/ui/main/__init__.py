"""The main screen: the Pending, Running and Finished panes and what sits around them.

``request_table`` (one pane, Line API, only visible rows drawn), ``status_bar`` (the engine's
state and sparklines), ``loading`` (start-up progress or the failure), ``filter_bar`` /
``filtering`` (``/``), ``aborts`` (``x``: exactly the chosen request, once),
``step_navigation`` (the history keys, live or in a replay) over ``history_cursor`` (which
snapshot of a live run's bounded history is pinned).
"""
