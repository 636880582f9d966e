"""Screens that answer one question about the step on screen: ``step_view`` (``v``: what did
this step spend its budget on, and why did the others wait?) and ``latency_view`` (``t``:
is it slow for everyone, or for a few?); and ``stacks_view`` (``K``, replaying a flight
recording: what were the engine core's threads doing when it was written?)."""
