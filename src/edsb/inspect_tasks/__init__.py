"""Inspect AI integration (extra `edsb[inspect]`): the benchmark's tasks, solver, scorer and model adapter."""
