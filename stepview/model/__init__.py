"""Plain data that every part of stepview shares: no vLLM, no Textual, no other stepview package.

What crosses a thread or a process is a value from here, never a live engine object.

``snapshot``
    :class:`~stepview.model.snapshot.StepSnapshot`, the frozen picture of the engine after one
    step, and what it holds: request views, completions, timings, counters, the engine's info.
``commands``
    what the UI (or a headless run) asks the driver to do: add, abort, pause, step, stop.
``engine_api`` / ``source`` / ``sink``
    the protocols around the driver: the engines it drives or watches, the sources the UI
    reads snapshots from, the sinks it hands every snapshot to.
``sampling`` / ``load`` / ``prompts``
    sampling parameters checked by vLLM's rules, a synthetic load's plan, the seed prompts
    and the lines of a prompts file.
``scheduling`` / ``alerts`` / ``lineage`` / ``errors``
    why a request waits and a step's token budget; problems a run shows; clones and forks;
    an exception told in one line.
``grow``
    an append-only list behind frozen views: how snapshots share what did not change.
"""
