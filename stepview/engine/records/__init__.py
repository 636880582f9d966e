"""The plug-in's records: what they hold, how they travel, how they are read. No vLLM.

Shared by the three places that handle them: the plug-in writes them inside vLLM's engine core,
stepview's own engine and the watching client read them. Plain data and zmq only, so a client
on a laptop can read a GPU box's records with msgspec and pyzmq alone.

``facts``
    the record of one engine-core step (msgspec structs, positional on the wire, evolving by
    appended fields) and its codec.
``channel``
    the transport: addresses (one per data-parallel rank), heartbeats, the subscriber and its
    connection state, the sink protocol the plug-in hands records to.
``curve``
    zmq's CURVE on the channel: encrypted, and only for the watches the server's owner allows
    (so a watch from another machine needs no ssh tunnel); also makes the key pairs.
``stacks``
    an engine core's thread stacks between the plug-in and stepview: the files in the
    plug-in's folder, the signal that asks for them, their topic and wire on the channel.
``catch_up``
    how a watch that lost records asks the plug-in for the ends it missed, and the answer.
``entries``
    a record read for one client: per request of the caller's, its state, prefill progress,
    preemptions, KV blocks and why it waits; consecutive records merged into one.
``stream``
    which of a subscriber's records can be read, in order: gaps, full records asked for
    (again, when one was dropped), the point records were missed after.
``request_states``
    vLLM's request states in one table: each status by name, its code on the wire, whether it
    waits, is blocked or runs, stepview's state for it and its words; what a status the table
    does not know becomes (said, never dropped).
``waiting_reasons``
    vLLM's scheduling rules, restated over one record: why each waiting request got nothing.
``vllm_versions``
    the vLLM versions stepview is tested on and the scheduling rules that differ between
    them, so the plug-in and the waiting reasons both select by the version a server runs.
"""
