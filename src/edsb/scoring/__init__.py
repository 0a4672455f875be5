"""Scoring: the condition parser, the judge (official evaluator semantics), metrics and `edsb score`."""
