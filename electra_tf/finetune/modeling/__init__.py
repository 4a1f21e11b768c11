"""Fine-tuning models: task heads on the encoder, --init loading, layer-wise rates, the saved classifier."""
