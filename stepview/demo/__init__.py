"""Fixed scenes of the UI: hand-made snapshots, sources that stand still, and key presses.

Shared by the SVG snapshot tests and ``scripts/screenshots.py`` (the README's pictures), so
the pictures in the README are the ones the tests check. No engine and no clock: the same
scene draws the same screen on every run and machine.
"""
