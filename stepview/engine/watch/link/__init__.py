"""The records link: a server running stepview's plug-in, watched through its records.

``--attach tcp://HOST:PORT`` (or ``ipc://``): each engine core's plug-in publishes a record
per step; this package subscribes to them and is the driver's
:class:`~stepview.model.engine_api.WatchedEngine`.

``attached``
    :class:`~stepview.engine.watch.link.attached.AttachedEngine`: the records' backlog, the
    link to each rank (lost, back, restarted), adding prompts through the API.
``backlog``
    the records received and not read yet, folded oldest first past a bound.
``watched_core`` / ``core_steps``
    one engine core (data-parallel rank): its records read into the driver's steps, with
    vLLM's own times for its requests.
``adopting``
    other clients' requests as first seen: short names never shared by two requests,
    prompt ids, sampling parameters.
``catching_up``
    a core whose records were lost (a watch too slow, a link that dropped) asking the
    plug-in's log of ends for what came and went meanwhile, and folding it in.
``unseen``
    other clients' requests that came and went where no record could show them: counted
    and said, never dropped.
``link_state``
    how the link reads to the user: what each core's plug-in says of itself (off, its
    vLLM), waiting, disconnected with requests held, behind.
``detokenize`` / ``local_text`` / ``descriptions``
    the watched requests' token ids turned into text by the server's own ``/detokenize``
    (prompts as adopted, completions as they end); on the server's machine, by the tokenizer
    the server loaded, once it agreed with the server; what was asked and answered about
    each request, and how long a record is held for the text of those it ends.
``server_stacks``
    the engine cores' thread stacks for a flight recording: asked of each core's plug-in on
    the records' channel, or why none came.
"""
