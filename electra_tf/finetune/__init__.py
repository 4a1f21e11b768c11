"""Fine-tuning the ELECTRA discriminator: GLUE, SQuAD 1.1/2.0, tagging and your own files.

Run it with ``python -m electra_tf.finetune --task sst2 ...`` (see docs/finetune.md).

Layout (by role):
  __main__.py, own_data_flags.py
                    the command line
  own_data_report.py what an own-data run prints and records (summary, table, predictions CSV)
  settings.py       `Settings` (what the job reads) and `FinetuneError`
  finetune_job.py   the job: `run_task` (every seed, resume, results.json)
  readers/          the data: GLUE, SQuAD, tagging and own-file readers, the tokenizer
                    (the table files themselves: electra_tf.data.table_files)
  tasks/            `FinetuneTask` and the task families (data, head, loss, evaluation,
                    export), `--task` name -> task (task_registry), metrics, SQuAD scoring
  training_setup.py strategy, datasets and step count for the one training loop
                    (electra_tf.training.trainer; the optimizer: training.finetune_optimizer)
"""
