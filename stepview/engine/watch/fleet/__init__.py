"""A fleet found where it is listed: ``--attach prometheus://``, a file_sd ``--attach-file``.

Each server found is watched as one ``--attach`` would (``link/`` or ``metrics/``); this
package only says which servers there are.

``prometheus_targets``
    the servers a Prometheus scrapes (one job), asked of its HTTP API.
``fleet_members``
    the thread that follows the listings, starting the watch of a server that joins and
    stopping that of one that leaves.
"""
