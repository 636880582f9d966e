"""Everything that touches an engine, in one room per place the code runs.

``plugin/`` — **inside vLLM's engine core**, the core process of any server started with
    ``--scheduler-cls stepview.engine.scheduler_plugin.StepviewScheduler``, or stepview's own.
    Runs on every step of someone's server, so it is the smallest and cheapest room; the only
    one that reads vLLM's private internals.
``own/`` — **stepview's own vLLM**: the adapter over ``LLMEngine``, vLLM's flags, the process
    environment vLLM needs, the link to the plug-in in either engine-core mode, the two
    built-in models (a tiny random one, SmolLM2) and their cache.
``watch/`` — **a running server, watched from outside** (``stepview --attach``): the
    plug-in's records over zmq (``link/``), or the server's ``/metrics`` alone (``metrics/``),
    a fleet as it is listed (``fleet/``), and the server's API for prompts and text
    (``api/``). Imports neither vLLM nor torch, so it runs on a laptop through an ssh tunnel.
``driver/`` — **the driver thread**, for either of the two above: commands in, one
    ``step()`` at a time, every request's bookkeeping (the ledger), frozen snapshots out.
    Talks to the :class:`~stepview.model.engine_api.Engine` protocol and imports no vLLM.
``records/`` — **what the others share**: the plug-in's record of a step (the wire format),
    the channel it travels on (encrypted with CURVE if asked), how a record becomes the
    driver's per-request entries, and vLLM's rules for why a request waits, by vLLM version.

``scheduler_plugin.py`` keeps the plug-in's published name working; the class lives in
``plugin/``. import-linter checks the walls: only ``plugin`` and ``own`` import vLLM, ``watch``
imports neither vLLM nor torch, nothing here imports Textual or the UI.
"""
