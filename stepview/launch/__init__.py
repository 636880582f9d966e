"""Running stepview once the command line is parsed: the composition root, one module per
mode, and what they share.

:mod:`stepview.cli` parses and hands the run's specs to ``root``, the composition root: it
checks the outputs' files, sets up the log and picks the mode of the run's source and front
end. The modes are siblings:

``tui``
    the live engine in the TUI (the default command).
``headless``
    vLLM's example, printed: every finished request, then the latency table.
``replay`` / ``summary`` / ``export`` / ``compare``
    a trace in the TUI without vLLM; its figures as text; the outputs written from it;
    two traces side by side or as a table.
``rerun``
    a trace's workload sent again to a new engine (a headless run), then compared with it.
``attach`` / ``attach_headless``
    a running server watched in the TUI, or without one until Ctrl+C.
``attach_metrics``
    a server without the plug-in watched through its ``/metrics`` alone
    (``--attach http://HOST:PORT``), in the TUI or as one JSON line per scrape.
``fleet``
    several servers at once (``--attach A --attach B``): the fleet screen, one server's full
    view from it, or one JSON line per server per scrape.

What they share: ``compose`` (the one construction of a driver, over any engine, with the
run's outputs handed to it, and the start-up every watch shares: the terminal, the CPU
priority, the collector), ``outputs`` (the registry's outputs of a run, opened before the
engine starts, reported and finished at the end: the one place for every mode), ``exits``
(exit codes, one-line messages, leaving the process), ``paths`` (the default log file),
``logs`` (the log file), ``priority`` (``--nice``: stepview's CPU priority, and its session's
scheduler autogroup where the session is stepview's alone),
``runner`` (running the Textual app: signals, the stop deadline), ``stuck`` (the way out past
an engine that did not stop by then: its processes killed), ``terminal`` (the terminal the
TUI needs), ``flight`` (``--flight-recorder``: its folder checked before the engine starts,
its notices, ``SIGUSR1`` in every live mode), ``signals_between`` (what each signal does
where no mode answers it, from the command's first line to its last), ``check`` (``stepview
check``: whether this environment's vLLM carries the plug-in, what answers at addresses) and
``help``.

Only :mod:`stepview.cli` imports this package, and it does so lazily, module by module: the
TUI must be drawing before anything heavy is imported, so this ``__init__`` imports nothing.
"""
