"""The emulated Cloud Logging: `entries.list` (`api`) over the jobs' replica logs as entries (`entries`),
narrowed by the query language's `filter`.
"""
