"""Several servers watched at once: the fleet screen, and one server's full view from it.

``fleet_app`` (one row per server and per data-parallel rank, live; Enter picks one; its
cells made by ``fleet_cells``) and ``server_app`` (the single-server app on that server's
borrowed source, Esc back to the fleet): an app per screen, each on sources the launcher
keeps running.
"""
