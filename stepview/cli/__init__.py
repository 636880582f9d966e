"""The ``stepview`` command line: stepview's own flags, and the mode they choose.

vLLM's ~340 engine flags stay with vLLM's parser; what is here needs no vLLM, so a mistake is
answered at once and the TUI draws before ``import vllm``. By responsibility:

``dispatch``
    :func:`main`, the ``stepview`` command (``stepview.cli:main`` in ``pyproject.toml``, and
    ``python -m stepview``): parses, refuses, then imports and runs the one mode of
    :mod:`stepview.launch` chosen.
``args``
    the parser of stepview's own flags and :class:`~stepview.cli.args.OwnOptions`, what every
    mode reads; the first half of ``--help``.
``conflicts``
    which flags cannot go together, or with the engine flags given: the one-line refusals.
``specs``
    the parsed flags as the run's specs (:mod:`stepview.run.spec`), the one form the modes
    read; the addresses parsed there, each refused in one line naming its flag.
``attach`` / ``watch`` / ``rerun``
    three groups of flags with modules of their own, for the value types they share: which
    server ``--attach`` watches, and how; a stepview left running beside a server (bounds,
    rotation, flight recorder, metrics); and a recording's workload sent again or exported.

The modes in :mod:`stepview.launch` read the specs of :mod:`stepview.run`, never this
package; ``dispatch`` imports the modes (import-linter, ``pyproject.toml``).
"""

from stepview.cli.dispatch import main

__all__ = ["main"]
