"""Adapters that let other schedulers call pal-opt in their own round loop."""
