"""The scheduler plug-in's published name, which servers are started with.

``--scheduler-cls stepview.engine.scheduler_plugin.StepviewScheduler`` is in people's server
command lines and unit files; the class itself lives in :mod:`stepview.engine.plugin`. This
module only keeps that name working, and costs the engine core nothing beyond the import.
"""

from stepview.engine.plugin.scheduler import StepviewScheduler

__all__ = ["StepviewScheduler"]
