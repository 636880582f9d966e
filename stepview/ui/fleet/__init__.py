"""Several servers watched at once: the fleet screen, and one server's full view from it."""
