"""Fine-tuning the ELECTRA discriminator: GLUE, SQuAD 1.1/2.0 and tagging.

Run it with ``python -m electra_tf.finetune --task sst2 ...`` (see docs/finetune.md).

Layout:
  run.py            the driver: `run_task` (every seed, resume, results.json)
  settings.py       `Settings` (the CLI's flags) and `FinetuneError`
  base_task.py      `FinetuneTask`: what a task family provides to the driver
  registry.py       --task name -> task object (`get_task`)
  glue_task.py, squad_task.py, tagging_task.py
                    the task families; their data readers and scorers are
                    glue_data.py, squad_data.py + squad_eval.py, tagging_data.py
  models.py, heads.py
                    the Keras models (encoder + head)
  training_loop.py  strategy, datasets, optimizer, checkpointed `fit`
  encoder_init.py   --init: finding and loading the pre-trained encoder
  classifier_dir.py the saved classifier that export serves
"""
