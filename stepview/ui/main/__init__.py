"""The main screen: the Pending, Running and Finished panes and what sits around them.

``panes`` (the three panes and the filter bar under them, fed one snapshot at a time), each a
``request_table`` (one pane, Line API, only visible rows drawn) whose rows ``request_rows``
formats (the columns and what each cell says) and ``chunk_filter`` picks (which requests go in
which pane, and through the filter, testing only the chunks of a snapshot that changed),
``status_bar`` (the engine's state and sparklines), ``loading`` (start-up progress or the
failure), ``filter_bar`` / ``filtering`` (``/``), ``aborts`` (``x``: exactly the chosen request,
once), ``step_navigation`` (the history keys, live or in a replay) over ``history_cursor``
(which snapshot of a live run's bounded history is pinned), ``server_panel`` (where the panes
were, for a server watched through ``/metrics`` alone: why requests wait, the window's
latency), ``flight_key`` (``F``: a flight recording asked for, and where it went) and
``draw_budget`` (how much of a core drawing may take before a tick is skipped).
"""
