"""Moved to formats/osu.py; this name stays until commands/run.py calls formats.check_run (then delete it)."""

from .formats.osu import check, layout, text  # noqa: F401
