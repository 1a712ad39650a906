"""faultline streams layer."""
