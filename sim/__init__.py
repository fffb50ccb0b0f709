"""sim: a cycle-level simulator of AI accelerators for LLM inference (work in progress)."""
__version__ = "0.1.0"
