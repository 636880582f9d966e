"""The event stream (``--events``): what stepview sees change, as JSON events for programs.

``schema``
    the events, version 1: each kind's fields, built as plain dicts (no I/O); the JSON
    Schema beside it (``events.schema.json``, package data) says the same for programs.
``derive``
    a snapshot's events, following what the driver says changed (O(changes) per step).
``spec``
    what ``--events`` and its companion flags ask for, parsed; the loopback rule.
``sink``
    the driver sink: a snapshot's events derived and handed to every outlet.
``lines``
    ``--events -`` and ``--events FILE``: JSON lines, a file rotated.
``buffer`` / ``sse``
    ``--events http://…``: the numbered ring of the latest events, and the Server-Sent
    Events server (one asyncio thread, per-reader queues, ``Last-Event-ID``, a token).
``output``
    the destinations of one run, opened before the engine starts, and the sinks for its
    drivers: the one object a mode needs.
``fleet``
    a fleet's ``server`` events: each server up, down, behind, joined or left.

No vLLM, no Textual, no engine: the same stream comes from stepview's own engine, a watched
server, a fleet and a replayed trace.
"""
