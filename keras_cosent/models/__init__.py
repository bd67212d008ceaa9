"""Sentence encoders on keras-hub backbones.

`SentenceEncoder` embeds one column of sentences; `SiameseEncoder` runs it over
every column of a pair/triplet batch for training. `default_checkpoint()` is the
packaged all-MiniLM-L6-v2 folder.
"""

from keras_cosent.models.checkpoints import default_checkpoint
from keras_cosent.models.sentence_encoder import SentenceEncoder
from keras_cosent.models.siamese_encoder import SiameseEncoder
