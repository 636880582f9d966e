"""A run, as the command line asked for it: small frozen specs, one per concern.

The command line (:mod:`stepview.cli`) parses its flags into these, and the modes
(:mod:`stepview.launch`) read them; neither the specs nor the modes import the command line
(import-linter: ``pyproject.toml``), so a mode can be run from a test, a benchmark or another
front end with the values it needs and nothing of argparse.

``spec``
    :class:`~stepview.run.spec.RunSpec` and its parts: the engine and its flags, the front
    end, what is fed to the engine (prompts, load), the watched server (addresses, API,
    scrape), the replay and the rerun, the outputs, and the run's limits and alerts; with the
    defaults the flags share with it (``--nice``, ``--window``...), and the sources a run can
    have (:attr:`~stepview.run.spec.RunSpec.source`).
``flag_values``
    the value types of flags (whole numbers, ports, sizes, durations), shared by the command
    line's groups and the output registry's flags.
"""
