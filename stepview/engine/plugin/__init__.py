"""The scheduler plug-in: stepview's code inside vLLM's engine core.

vLLM builds its scheduler from the class named by ``--scheduler-cls``; stepview's is vLLM's own
scheduler plus a record of every step, handed to stepview's engine in its process or published
over zmq to whoever attaches. Every microsecond here is a server's serving time, so the work
per step is the least that tells what happened, and nothing at all while nobody listens.

``scheduler``
    :class:`~stepview.engine.plugin.scheduler.StepviewScheduler`: vLLM's scheduler (or the
    user's own ``--scheduler-cls``) with the capture hooked in after ``schedule()``, the
    outputs update and aborts. Published as ``stepview.engine.scheduler_plugin``.
``capture``
    what the record holds and how it is built from the scheduler's state; never raises into
    vLLM (a failure switches the plug-in off, with one log line).
``naming``
    which requests the next record names: what changed since the last one, every one held,
    or, for a new subscriber of a core holding many, the next part of a full record sent over
    a few steps (built in one, it was that step's delay).
``times``
    vLLM's own times for a request (first scheduled, first token), put in the records on the
    records' wall clock, for a client that never sees the core's outputs.
``intro``
    a request's prompt token ids and sampling parameters, sent once to a client that did not
    add the request.
``vllm_versions``
    the rules that differ between vLLM versions applied to the live scheduler, what the
    capture reads checked when the scheduler is built, and the off switch told to listeners.
``stacks``
    the core's thread stacks, written by faulthandler when a step hangs (a thread of the
    plug-in watches the step counter; faulthandler's C watchdog where that thread cannot run)
    or when stepview or a watch asks; nothing of it runs per step.
``config``
    where the records go (the in-process listener or a publisher, from ``STEPVIEW_PUBLISH``)
    and which class the plug-in extends.
``waiting_head``
    where vLLM's scan of the waiting queues stopped (the record's one word on the queue).
``statuses``
    the running vLLM's ``RequestStatus`` read by the table of request states, once at import:
    each status's wire code, those named in every record and passed over by the scan.
``publisher``
    the engine core's end of the zmq channel (XPUB: knows whether anyone listens, never
    blocks the engine; answers a watch's catch-up question).
``end_log``
    a bounded log of the requests that ended, as a watch that never saw them needs them:
    a watch that lost records catches up from it.
``client_side``
    the two reads of vLLM's private objects stepview's own engine makes from the client side
    (engine-core id to the caller's id; pausing a core in its own process): kept here so that
    one room holds everything that depends on vLLM's internals.
``selfcheck``
    the plug-in over this environment's real scheduler classes without a model or a GPU, as
    vLLM's own scheduler tests build them: ``stepview check``'s probe, and how the conformance
    suite (``tests/conformance``) builds every release's scheduler.

Nothing here imports Textual or any of stepview's UI; ``scheduler``, ``capture``, ``times``,
``statuses`` and ``vllm_versions`` import vLLM and run only where vLLM runs.
"""
