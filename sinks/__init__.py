"""faultline sinks layer."""
