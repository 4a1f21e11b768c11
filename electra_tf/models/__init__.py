"""ELECTRA networks as Keras layers: embeddings, encoders and heads.

Also the whole models, one a module: the pre-training networks (pretraining_model.py, their
embedding sharing in embedding_sharing.py) and the fine-tuned classifier, tagger and SQuAD
reader (classifier_model.py, tagger_model.py, squad_model.py, with their heads:
classification_head.py, token_classification_head.py, span_head.py, answerable_head.py).
And the model folder on disk: its file names, finding and reading it (model_folder.py), and
writing and loading its weights (saving.py).
"""

from electra_tf.models.builders import build_embeddings, build_encoder, build_generator_encoder
from electra_tf.models.embeddings import ElectraEmbeddings
from electra_tf.models.encoder import ElectraEncoder
from electra_tf.models.heads import DiscriminatorHead, build_generator_head

__all__ = [
    "ElectraEmbeddings",
    "ElectraEncoder",
    "DiscriminatorHead",
    "build_embeddings",
    "build_encoder",
    "build_generator_encoder",
    "build_generator_head",
]
