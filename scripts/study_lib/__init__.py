"""Helpers of scripts/efficiency_study.py: its outputs (report) and --time_steps (timing)."""
