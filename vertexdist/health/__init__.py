"""Rank health read back: a job's heartbeats as ranks, stragglers and a hang verdict (pure: `verdict`)."""
