"""What the studies share: the cell log (cells), the baselines an encoder has to beat (baselines),
the domain study's ladder and report (domain_ladder, domain_report), and the efficiency study's
data, outputs and --time_steps (efficiency_data, efficiency_report, efficiency_timing)."""


class StudyError(ValueError):
    """Bad flags or an inconsistent work directory; the message names the fix."""
