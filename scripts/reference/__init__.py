"""The reference check (reference_check.py) and its parts (reference_lib): `python
scripts/reference/reference_check.py` or `python -m scripts.reference.reference_check`."""
