"""Readers of the fine-tuning data: GLUE, SQuAD, tagging and your own files, and their tokenizer."""
