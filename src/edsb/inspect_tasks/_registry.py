"""Loaded by Inspect through the `inspect_ai` entry point: importing the tasks registers them as `edsb/...`, and the
provider below makes `--model edsb/oracle` (and `edsb/oracle-wrong`) known."""

from inspect_ai.model import ModelAPI, modelapi

from edsb.inspect_tasks.tasks import edsb_table1, edsb_table2


@modelapi(name="edsb")
def edsb_oracle() -> type[ModelAPI]:
    """edsb's oracle as a model provider, imported only when an eval asks for it."""
    from edsb.inspect_tasks.provider import OracleAPI

    return OracleAPI


__all__ = ["edsb_oracle", "edsb_table1", "edsb_table2"]
