"""edsb: a harness for the Event-Driven Storytelling Benchmark (Lim et al., ICCV 2025)."""

__version__ = "0.1.0"

# The reference repository whose evaluator and prompts edsb reproduces.
REFERENCE_REPO = "rms0329/Event-Driven-Storytelling"
REFERENCE_COMMIT = "8a6f726951decf3327d4e015c11202c19dca1749"
