"""Recording a run and playing it back: everything about trace files, in one place.

``format``
    the file format: header, version, errors, and the codecs of a line's small values.
``step_fields``
    the one table of a snapshot's step-level fields (all but requests and sparklines): how
    each is written when it changed and read back; a test holds it to ``StepSnapshot``.
``encoder``
    snapshots to lines: what changed since the previous snapshot, as request deltas.
``store``
    a trace in memory, shared between versions like the driver's snapshots, and the
    snapshots built from it on demand.
``reader`` / ``deltas``
    lines back to snapshots: opens and checks a file, decodes it all or a chunk at a time;
    a stored request plus one delta made into the next (the encoder's deltas undone).
``playback`` / ``replay``
    the commands a replay takes, and the thread that plays a trace as a snapshot source.
``linefile`` / ``recorder``
    the ``--record`` sink that writes a trace while the engine runs.
``workload``
    the requests a trace saw, rebuilt to be sent again (``--rerun``) or exported
    (``--export-workload``): prompts, parameters, arrival offsets, recorded lengths.
``flight``
    the ``--flight-recorder`` sink: the last minutes encoded into a ring in memory, written as
    a trace of its own on an alert, ``SIGUSR1`` or the TUI's key.

Nothing here imports vLLM, torch or Textual (a test checks it): a trace recorded on a GPU
box replays on a laptop without them, and the UI reads a replay through the same protocol as
a live engine.
"""
