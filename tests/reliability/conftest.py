"""Fixtures of the reliability tests: the pre-training job's shards (tests/pretrain)."""

from reliability_helpers import pretrain_job

# The same small shards and flag builder as the pre-training job tests.
job_data = pretrain_job.job_data
job_args = pretrain_job.job_args
