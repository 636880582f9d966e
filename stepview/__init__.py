"""stepview: vLLM's engine, step by step, in a terminal.

Where each part runs, and so where its code lives:

``engine/``
    everything that touches an engine, in rooms by where the code runs: ``plugin/`` inside
    vLLM's engine core (any server's), ``own/`` stepview's own vLLM, ``watch/`` a running
    server seen from outside (no vLLM, no torch), ``driver/`` the thread that turns any
    engine's steps into snapshots, ``records/`` what the plug-in's records hold and how they
    are read, shared by the other four. See :mod:`stepview.engine`.
``model/``
    plain data every part shares, importing no vLLM, no Textual and no other stepview package:
    snapshots, commands, chat messages, sampling rules, wait reasons, alerts, per-request
    latency, the protocols between the driver, its engines, its sinks and the UI.
``insight/``
    analysis of snapshots (timelines, percentiles, alerts, run comparison, Chrome traces, a
    fleet's rows, ``/metrics`` windows): the same answers live, in a replay and in a summary.
``otlp/``
    ``--otlp-traces-endpoint``: each request as OpenTelemetry spans, sent to a trace backend
    (the only code that imports OpenTelemetry, an optional extra).
``metrics/``
    Prometheus metrics of a run (``--metrics-port``): what vLLM's own ``/metrics`` cannot say.
``trace/``
    recording a run and playing it back without vLLM.
``files/``
    the files a run reads and leaves for people: prompts in; results, CSV, Chrome trace out.
``outputs/``
    the output registry: every output a run can write, serve or print, one entry each (its
    flags, rules, files, and how it opens, writes and finishes), read by ``cli/`` and
    ``launch/`` alike.
``events/``
    the event stream (``--events``): what changes, as versioned JSON events for programs, to
    a file, standard output or Server-Sent Events; the schema shipped beside it.
``ui/``
    the Textual app, which reads snapshots and never imports vLLM or the engine.
``cli/``
    the command line: parses stepview's own flags (vLLM's stay with vLLM's parser), refuses
    those that cannot go together and hands the run's specs to ``launch/``; its ``main`` is
    the ``stepview`` command.
``run/``
    a run as the command line asked for it: small frozen specs, one per concern (engine,
    front end, feed, limits, watched server, outputs), which the modes of ``launch/`` read
    instead of the command line's flags.
``launch/``
    the composition root (``root``: a source, a front end, the outputs) and one module per
    mode (TUI, headless, replay, attach, fleet, compare, summary), and what they share: the
    driver's construction, the outputs opened and finished, exit codes, logging, the app
    runner.
``testing/``
    test doubles and fixed scenes (a fake engine, hand-made snapshots) for the tests, the
    screenshots and the UI benchmark; nothing that ships a run imports it.

``version.py`` says which stepview this is (distributed as ``vllm-stepview``);
``__main__.py`` makes ``python -m stepview`` the same command. The layers are checked by
import-linter (``pyproject.toml``).
"""
