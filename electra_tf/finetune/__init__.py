"""Fine-tuning the ELECTRA discriminator: GLUE, SQuAD 1.1/2.0, tagging and your own files.

Run it with ``python -m electra_tf.finetune --task sst2 ...`` (see docs/finetune.md).

Layout (by role):
  __main__.py, own_data_flags.py
                    the command line
  settings.py       `Settings` (what the job reads) and `FinetuneError`
  finetune_job.py   the job: `run_task` (every seed, resume, results.json)
  readers/          the data: GLUE, SQuAD, tagging and own-file readers, the tokenizer
  tasks/            `FinetuneTask` and the task families (data, head, loss, evaluation,
                    export), `--task` name -> task (task_registry), metrics, SQuAD scoring
  modeling/         the Keras models (encoder + task head), --init loading, layer-wise
                    learning rates, the saved classifier that export serves
  training_setup.py strategy, datasets, optimizer spec and step count for the one
                    training loop (electra_tf.training.trainer)
"""
