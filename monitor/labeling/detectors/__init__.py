"""Detectors of personal data and secrets in free text, one module per family (docs/sampling.md)."""
