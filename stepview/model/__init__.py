"""Plain data that every part of stepview shares: no vLLM, no Textual, no other stepview package.

What crosses a thread or a process is a value from here, never a live engine object.

``snapshot``
    :class:`~stepview.model.snapshot.StepSnapshot`, the frozen picture of the engine after one
    step, and what it holds: request views, completions, timings, counters, the engine's info.
``active`` / ``recent``
    the requests a snapshot holds, built at O(changes): those not finished, in chunks shared
    between snapshots; the latest finished, in a bounded window, with a count of all.
``latency``
    one request's latency figures (queue, TTFT, ITL, end-to-end, decode rate), each defined
    once for the panes, the panel, the records and the CSV.
``server_window``
    what a ``/metrics`` scrape of a server without the plug-in adds to a snapshot: windowed
    latency percentiles, why requests wait, how to get the per-request view.
``commands`` / ``chat``
    what the UI (or a headless run) asks the driver to do: add, abort, pause, step, stop; and
    a chat request's messages, which only the engine can turn into a prompt.
``engine_api`` / ``source`` / ``sink`` / ``flight``
    the protocols around the driver: the engines it drives or watches, the sources the UI
    reads snapshots from, the sinks it hands every snapshot to, and the flight recorder as
    the UI and the launcher ask it for a recording.
``address``
    what an address names, parsed once (the command line's ``--attach``, the plug-in's
    ``STEPVIEW_PUBLISH``): the plug-in's records over tcp/ipc with their ranks, a server's
    ``/metrics`` page, where a fleet is listed (a Prometheus server, a file_sd file).
``targets``
    a fleet's servers as listed (address, labels, which listing) and as watched (with their
    source), and the roster the fleet screen reads them from, fixed or changing.
``sampling`` / ``load`` / ``prompts``
    sampling parameters checked by vLLM's rules, a synthetic load's plan, the seed prompts
    and the lines of a prompts file.
``scheduling`` / ``alerts`` / ``lineage`` / ``errors``
    why a request waits (the table of wait reasons: code, word, label, sentence) and a
    step's token budget; problems a run shows; clones and forks; an exception told in one
    line.
``epoch``
    where a run's clock 0 sits on the wall clock (noted at its first snapshot, kept in a
    recording's header): what places its times among other programs' (OpenTelemetry spans).
``stacks``
    an engine core's thread stacks at one moment (faulthandler's text, read into threads and
    frames), or why a recording has none.
``outside_text``
    text that did not originate in stepview (a server's names, a file's labels, a trace's
    ids, vLLM's errors) made harmless for a terminal: the one rule every terminal write
    follows, the TUI's cells and the lines on stdout and stderr alike.
``endpoint``
    the words for an HTTP endpoint stepview serves (metrics, events): its address, and why
    its port could not be had, in one line.
``grow``
    an append-only list behind frozen views: how snapshots share what did not change.
"""
