"""A fleet found where it is listed: ``--attach prometheus://``, a file_sd ``--attach-file``.

Each server found is watched as one ``--attach`` would (``link/`` or ``metrics/``); this
package says which servers there are, and runs their watches on a bounded pool.

``prometheus_targets``
    the servers a Prometheus scrapes (one job), asked of its HTTP API.
``fleet_members``
    the thread that follows the listings, starting the watch of a server that joins and
    stopping that of one that leaves.
``fleet_pool``
    every member's watch on one event loop and a few workers (no thread per server), and a
    member as the snapshot source the screens read.
``pooled_driver``
    a plug-in server's driver as a pool's member: a turn of its loop at the fleet's pace.
"""
