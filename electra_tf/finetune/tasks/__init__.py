"""The task families: what each provides to the fine-tuning job (data, head, loss, evaluation, export)."""
