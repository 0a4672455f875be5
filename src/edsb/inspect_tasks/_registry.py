"""Loaded by Inspect through the `inspect_ai` entry point: importing the tasks registers them as `edsb/...`."""

from edsb.inspect_tasks.tasks import edsb_table1, edsb_table2

__all__ = ["edsb_table1", "edsb_table2"]
