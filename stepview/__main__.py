"""``python -m stepview`` is the ``stepview`` command."""

from stepview.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
