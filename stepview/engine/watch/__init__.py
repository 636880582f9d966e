"""A running vLLM server, watched from outside (``stepview --attach``). No vLLM, no torch.

The server runs stepview's plug-in and publishes its records; this room subscribes to them and
presents the server to the driver as a :class:`~stepview.model.engine_api.WatchedEngine`, so
the same ledger, panes, history and files serve a watched server and stepview's own engine. It
needs only pyzmq, msgspec and the standard library: attach from a laptop through a tunnel.

One sub-package per way of watching a server, and one for the API they share:

``link/``
    the records link (``--attach tcp://``, ``ipc://``): the plug-in's records subscribed to,
    each engine core's read into the driver's steps, requests adopted, lost records caught
    up, and what the link says to the user.
``api/``
    the server's OpenAI-compatible HTTP API, which the records link (prompts, text) and the
    two watches below (the served model, Prometheus' listing) all use.
``metrics/``
    a server without the plug-in (``--attach http://HOST:PORT``): its ``/metrics`` page read
    into snapshots, and its KV-cache events (``--kv-events``) beside it.
``fleet/``
    a fleet found where it is listed (``--attach prometheus://``, a file_sd
    ``--attach-file``): which servers are in it, followed as they join and leave.

The imports run one way: ``link``, ``metrics`` and ``fleet`` use ``api``; none uses another.
"""
