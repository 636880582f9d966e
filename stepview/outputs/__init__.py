"""The output registry: every output a run can write, serve or print, one entry each.

An entry (:class:`~stepview.outputs.entry.Output`) holds an output's flags and help, what it
needs, the sources it goes with, its rules, the files it names, and how it is opened,
finished and written from a trace; the command line's flags, refusals and path checks, and
the modes' opening and finishing of outputs, all follow from the entries. Importing an entry
is cheap (the command line reads them all before anything runs): what an output needs to
write is imported when it is opened.

``entry``
    what an entry is: :class:`~stepview.outputs.entry.Output`, its flags, the sources and
    needs it names, and what it is opened, finished and written from a trace with.
``registry``
    :data:`~stepview.outputs.registry.OUTPUTS`, the one list, and what follows from it.
``printing``
    ``--json``: what ``--headless`` prints.
``run_files``
    the results file and the trace, written as the run goes.
``spans``
    ``--otlp-traces-endpoint``: each request as OpenTelemetry spans, live or from a trace.
``events``
    ``--events``: the event stream (:mod:`stepview.events`), live and from a trace.
``watching``
    the Prometheus exporter and the flight recorder.
``exports``
    the CSV, the Chrome trace and the workload: at the end of a run, or from a trace.
``paths``
    the check of every file named, before anything starts.
"""
