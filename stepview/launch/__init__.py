"""Running stepview once the command line is parsed: the three modes and what they share.

``cli.py`` parses and dispatches to one of the modes, which are siblings: ``tui`` (the live
engine in the TUI), ``headless`` (vLLM's example, printed) and ``replay`` (a trace in the TUI,
without vLLM). What they share: ``exits`` (exit codes, one-line messages, leaving the
process), ``paths`` (default files), ``outputs`` (the files a live run writes, opened before
the engine starts and reported at the end), ``logs`` (the log file), ``runner`` (running the
Textual app: signals, the stop deadline) and ``help``.

Only ``cli`` imports this package, and it does so lazily, module by module: the TUI must be
drawing before anything heavy is imported, so this ``__init__`` imports nothing.
"""
