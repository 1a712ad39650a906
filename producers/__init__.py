"""faultline producers layer."""
