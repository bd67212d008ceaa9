"""Sentence encoders on keras-hub backbones.

`SentenceEncoder` embeds one column of sentences (its `SentencePreprocessor`
turns raw text into the token arrays it takes); `SiameseEncoder` runs it over
every column of a pair/triplet batch for training; `CachedSiameseEncoder` does so
in mini-batches with cached embedding gradients (GradCache), and
`MomentumContrastModel` adds MoCo's queue of momentum-encoder negatives.
`default_checkpoint()` is the
packaged all-MiniLM-L6-v2 folder; `load_encoder(model)` reads
a `.keras` file, a run directory, a checkpoint folder or a preset name. `HFBertTokenizer` (loaded on first use,
as it imports keras-hub) lowercases like Hugging Face's BERT tokenizer.
"""

from keras_cosent.models.cached_siamese_encoder import CachedSiameseEncoder
from keras_cosent.models.checkpoints import default_checkpoint
from keras_cosent.models.encoder_loading import load_encoder
from keras_cosent.models.momentum_contrast_model import MomentumContrastModel
from keras_cosent.models.sentence_encoder import SentenceEncoder
from keras_cosent.models.sentence_preprocessor import SentencePreprocessor
from keras_cosent.models.siamese_encoder import SiameseEncoder
from keras_cosent.models.multi_task_encoder import MultiTaskEncoder
from keras_cosent.models.softmax_classifier_model import SoftmaxClassifierModel

__all__ = [
    "CachedSiameseEncoder",
    "default_checkpoint",
    "load_encoder",
    "MomentumContrastModel",
    "SentenceEncoder",
    "SentencePreprocessor",
    "SiameseEncoder",
    "MultiTaskEncoder",
    "SoftmaxClassifierModel",
    "HFBertTokenizer",
]


def __getattr__(name):
    if name == "HFBertTokenizer":
        from keras_cosent.models.hf_bert_tokenizer import HFBertTokenizer

        return HFBertTokenizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
