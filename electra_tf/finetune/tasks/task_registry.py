"""--task name -> its `FinetuneTask` object: the one place that lists the task families.

A new task family is a `FinetuneTask` subclass added to `_build_tasks`; the
driver and the CLI pick it up by name.
"""

from __future__ import annotations

from typing import Dict, Tuple

from electra_tf.finetune.readers import glue_data
from electra_tf.finetune.tasks.base_task import FinetuneTask
from electra_tf.finetune.tasks.glue_task import GlueFinetuneTask
from electra_tf.finetune.tasks.own_data_task import TASK_NAME as OWN_DATA, OwnDataFinetuneTask
from electra_tf.finetune.settings import FinetuneError
from electra_tf.finetune.tasks.squad_task import SQUAD_VERSIONS, SquadFinetuneTask
from electra_tf.finetune.tasks.tagging_task import TAGGING_NAMES, TaggingFinetuneTask


def _build_tasks() -> Dict[str, FinetuneTask]:
    tasks: Dict[str, FinetuneTask] = {}
    for name, spec in glue_data.GLUE_TASKS.items():
        tasks[name] = GlueFinetuneTask(spec)
    for name, version_2 in SQUAD_VERSIONS.items():
        tasks[name] = SquadFinetuneTask(name, version_2)
    for name in TAGGING_NAMES:
        tasks[name] = TaggingFinetuneTask(name)
    tasks[OWN_DATA] = OwnDataFinetuneTask()  # chosen by --train_file
    return tasks


# Task objects are stateless (see `FinetuneTask`), so one of each serves every run.
TASKS: Dict[str, FinetuneTask] = _build_tasks()
ALL_TASKS: Tuple[str, ...] = tuple(TASKS)


def get_task(name: str) -> FinetuneTask:
    """The task object for a --task name.

    Args:
      name: an exact task name (the CLI maps GLUE aliases such as sst-2 first).

    Raises:
      FinetuneError: for a name no task family knows, with the list of names.
    """
    try:
        return TASKS[name]
    except KeyError:
        raise FinetuneError(f"unknown --task {name!r}; choose one of {', '.join(ALL_TASKS)}") from None
