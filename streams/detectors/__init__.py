"""Detectors: pure, per subject, bounded state (see docs/streams.md)."""
