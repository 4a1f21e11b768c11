"""The studies and checks that run from a checkout (not part of the installed electra_tf).

`pip install -e .` puts the checkout root on sys.path (setup.cfg's `package_dir`), so this folder
is the importable package `scripts`: a study runs as `python scripts/domain_study.py` or
`python -m scripts.domain_study`, and the tests import `scripts.domain_study` directly. The pieces
the studies share are `scripts.study_lib`; the reference check's are `scripts.reference.reference_lib`.
"""
