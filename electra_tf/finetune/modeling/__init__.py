"""--init's last step, re-drawing the top blocks (the fine-tuning models live in electra_tf.models)."""
