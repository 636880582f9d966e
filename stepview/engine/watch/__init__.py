"""A running vLLM server, watched from outside (``stepview --attach``). No vLLM, no torch.

The server runs stepview's plug-in and publishes its records; this room subscribes to them and
presents the server to the driver as a :class:`~stepview.model.engine_api.WatchedEngine`, so
the same ledger, panes, history and files serve a watched server and stepview's own engine. It
needs only pyzmq, msgspec and the standard library: attach from a laptop through a tunnel.

``attached``
    :class:`~stepview.engine.watch.attached.AttachedEngine`: the records' backlog, the link to
    each rank (lost, back, restarted), adding prompts through the API.
``backlog``
    the records received and not read yet, folded oldest first past a bound.
``watched_core`` / ``core_steps``
    one engine core (data-parallel rank): its records read into the driver's steps, with
    vLLM's own times for its requests.
``unseen``
    other clients' requests that came and went where no record could show them: counted
    and said.
``plugin_word``
    what each core's plug-in says of itself: switched off (and why), the vLLM it runs.
``link_state``
    how the link reads to the user: waiting, disconnected with requests held, behind.
``server_stacks``
    the engine cores' thread stacks for a flight recording: asked of each core's plug-in on
    the records' channel, or why none came.
``catching_up``
    a core whose records were lost (a watch too slow, a link that dropped) asking the
    plug-in's log of ends for what came and went meanwhile, and folding it in.
``adopting``
    other clients' requests as first seen: short names never shared by two requests,
    prompt ids, sampling parameters.
``metrics_page`` / ``metrics_watch`` / ``metrics_source``
    a server without the plug-in (``--attach http://HOST:PORT``): its Prometheus page read,
    one :class:`~stepview.engine.watch.metrics_watch.MetricsWatch` per server making
    snapshots, and the thread that feeds them to the TUI.
``fleet_members`` / ``prometheus_targets``
    a fleet found where it is listed (``--attach prometheus://``, a file_sd ``--attach-file``):
    the servers Prometheus scrapes, asked of its HTTP API, and the thread that follows the
    listings, starting the watch of a server that joins and stopping that of one that leaves.
``kv_event_wire`` / ``kv_blocks`` / ``kv_events_watch``
    the server's KV-cache events (``--kv-events``): decoded without vLLM, folded into block
    churn and prefix reuse, subscribed to beside ``/metrics``.
``server_api`` / ``detokenize`` / ``api_key``
    the server's OpenAI-compatible API: prompts sent with the form's parameters, other
    clients' token ids turned into text by the server's own ``/detokenize``, the key a
    server started with ``--api-key`` wants (never shown).
"""
