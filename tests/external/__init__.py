"""Out-of-simulator scenarios: hand-written contract events for the attribution tests."""
