"""Backends: one per target behind one small interface (`base.Backend`)."""
