"""Classify new text with a fine-tuned model: `Predictor` (Python) and `python -m electra_tf.predict`.

See electra_tf/predict/predictor.py (the library) and electra_tf/predict/__main__.py (the CLI).
"""

from electra_tf.predict.predictor import Prediction, PredictError, Predictor

__all__ = ["Prediction", "PredictError", "Predictor"]
