"""TEMPORARY stand-in for keras_cosent.models.SentenceEncoder until it lands on main."""

import keras
import numpy as np
from keras import ops

from keras_cosent.data.padding import pad_batch


@keras.saving.register_keras_serializable(package="keras_cosent_interim")
class InterimEncoder(keras.Model):
    def __init__(self, backbone, tokenizer, max_length=16, **kwargs):
        super().__init__(**kwargs)
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.max_length = max_length

    @property
    def pad_id(self):
        return int(self.tokenizer.pad_token_id)

    def call(self, inputs):
        x = self.backbone(inputs)["sequence_output"]
        m = ops.cast(ops.expand_dims(inputs["padding_mask"], -1), x.dtype)
        x = ops.sum(x * m, 1) / ops.maximum(ops.sum(m, 1), 1.0)
        return ops.cast(ops.normalize(x, axis=-1), "float32")

    def tokenize(self, texts):
        out = []
        for ids in self.tokenizer(list(texts)):
            ids = np.asarray(ids, "int32")[: self.max_length - 2]
            out.append(np.concatenate([[self.tokenizer.cls_token_id], ids,
                                       [self.tokenizer.sep_token_id]]).astype("int32"))
        return out

    def preprocess(self, texts):
        return pad_batch(self.tokenize(texts), pad_id=self.pad_id)

    def encode(self, texts, batch_size=32, progress=False):
        return ops.convert_to_numpy(self(self.preprocess(texts)))

    def get_config(self):
        config = super().get_config()
        config.update(
            backbone=keras.saving.serialize_keras_object(self.backbone),
            tokenizer=keras.saving.serialize_keras_object(self.tokenizer),
            max_length=self.max_length,
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
        config["tokenizer"] = keras.saving.deserialize_keras_object(config["tokenizer"])
        return cls(**config)

    @classmethod
    def from_checkpoint(cls, path, pooling="mean", max_length=128):
        import keras_hub

        backbone = keras_hub.models.BertBackbone.from_preset(str(path))
        tokenizer = keras_hub.models.BertTokenizer.from_preset(str(path))
        return cls(backbone, tokenizer, max_length=max_length)
