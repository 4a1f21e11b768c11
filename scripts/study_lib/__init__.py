"""Helpers of scripts/efficiency_study.py: its data (data), outputs (report) and --time_steps (timing)."""


class StudyError(ValueError):
    """Bad flags or an inconsistent work directory; the message names the fix."""
