"""scripts/reference/reference_check.py's parts: the reference's numpy rules, its PyTorch / Hugging Face
model, our TF pre-trainer as the check steps it, the window metrics and the training run."""
