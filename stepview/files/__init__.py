"""The files a run leaves for people (and those it reads from them), apart from traces.

``records``
    a request as one JSON object (``--headless --json``, the results file) and in the form
    of vLLM's ``RequestOutput``.
``results_file`` / ``sinks``
    the results file written as requests finish, and opening it with the trace before a run
    starts (an unwritable path fails before the engine loads).
``csv_export``
    one row per request with its timings (``--export-csv``).
``chrome_trace_file``
    the Chrome trace (``--export-chrome-trace``) written: :mod:`stepview.insight` computes it.
``targets_file`` / ``file_sd``
    ``--attach-file``: a plain list of addresses, or Prometheus' file_sd target groups (JSON
    or YAML, with labels), told apart by content; the latter followed while watching.
``prompts_file``
    a prompts file (or standard input, ``--prompts -``) read and checked line by line before
    anything runs.
``workload_export``
    a recorded run's workload (``--export-workload``) as a prompts file, or as the
    ``timed_trace`` dataset vLLM's own benchmark replays.

Plain data and the standard library: no vLLM, no Textual, no engine.
"""
