"""The sentence encoder: a keras-hub text backbone, a pooling layer and L2 normalisation.

`SentenceEncoder` is what gets trained (inside `keras_cosent.models.SiameseEncoder`),
evaluated (`encode` feeds the Spearman callback) and exported. It keeps its
keras-hub tokenizer, so a saved `.keras` file is enough to embed raw text.

It follows the construction of `keras_hub.models.BertTextEmbedder` (a functional
model over `backbone.input`) but is built beside it rather than on it:
BertTextEmbedder is a keras-hub `Task` tied to `BertBackbone` with a
preprocessor that pads every batch to one fixed length, offers three pooling
modes only, and its `from_preset` would lose the exact-GELU and accent fixes
on reload (see `keras_cosent.models.checkpoints`).
"""

import contextlib
import os

import keras
import numpy as np

from keras_cosent import compat
from keras_cosent.api_export import keras_cosent_export
from keras_cosent.layers.l2_normalization import L2Normalization
from keras_cosent.layers.pooling import POOLING_LAYERS
from keras_cosent.layers.pooling import get_pooling
from keras_cosent.models import checkpoints
from keras_cosent.models import compile_config
from keras_cosent.models import inference_batches
from keras_cosent.models import sentence_preprocessing
from keras_cosent.models import sequence_packing
from keras_cosent.models.sentence_preprocessor import SentencePreprocessor
from keras_cosent.models.xla import resolve_jit_compile
from keras_cosent.utils.arguments import check_bool
from keras_cosent.utils.truncation import check_truncate_dim
from keras_cosent.utils.truncation import truncate_embeddings


def _check_backbone(backbone):
    """Raises unless `backbone` is a functional model with named inputs (a keras-hub
    backbone): a name or a path given here would fail deep inside Keras."""
    try:
        inputs = backbone.input if isinstance(backbone, keras.Model) else None
    except (AttributeError, ValueError):  # a subclassed model has no `input`
        inputs = None
    if not isinstance(inputs, dict):
        hint = (" To load a checkpoint by name or path, call "
                "`SentenceEncoder.from_checkpoint(...)`." if isinstance(backbone, str) else "")
        raise TypeError(
            "`backbone` should be a keras-hub backbone (a functional keras.Model with "
            "`token_ids` and `padding_mask` inputs), e.g. keras_hub.models.BertBackbone."
            f"{hint} Received: `backbone` of type {type(backbone).__name__}"
        )


@keras_cosent_export
class SentenceEncoder(keras.Model):
    """Maps tokenised sentences to L2-normalised float32 sentence embeddings.

    Token states of a keras-hub text backbone (`BertBackbone`, or another
    encoder backbone taking `token_ids`, `padding_mask` and optionally
    `segment_ids`) are pooled with a `keras_cosent.layers` pooling layer and
    normalised to unit length, so that dot products are cosines.

    Args:
        backbone: a keras-hub backbone, e.g. `keras_hub.models.BertBackbone`.
        tokenizer: the matching keras-hub tokenizer, or None (then `tokenize`,
            `preprocess` and `encode` are unavailable; calling on token ids works).
        pooling: pooling name, one of `"mean"`, `"cls"`, `"max"`,
            `"mean_sqrt_len"`, `"weighted_mean"`, `"first_last_avg"`
            (average of the first and last transformer layer outputs).
        max_length: int, the longest token sequence, `[CLS]` and `[SEP]`
            included; longer sentences are truncated by `tokenize`.
        exact_gelu: bool. If True, the backbone's feed-forward GELU is switched
            to the exact erf form used by `transformers` (keras-hub's BERT uses
            the tanh approximation). Stored in the config and re-applied on
            reload; False leaves the backbone as it is (one already switched,
            such as another encoder's, is recorded as exact). `from_checkpoint`
            sets it from the checkpoint's `hidden_act`.
        **kwargs: `keras.Model` keyword arguments (`name`, ...).

    Call arguments:
        inputs: dict of `(batch, seq)` arrays `token_ids` (int), `padding_mask`
            (bool or 0/1) and `segment_ids` (int; dropped for backbones that
            take none), as returned by `preprocess`.

    Returns:
        float32 `(batch, dim)` embeddings of unit L2 norm.

    Example:

    >>> import keras_hub
    >>> import keras_cosent
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat"]
    >>> tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab, lowercase=True)
    >>> backbone = keras_hub.models.BertBackbone(
    ...     vocabulary_size=len(vocab), num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=16)
    >>> encoder = keras_cosent.models.SentenceEncoder(backbone, tokenizer, max_length=16)
    >>> encoder.encode(["The cat sat", "the cat"]).shape
    (2, 8)

    With a real checkpoint (the packaged all-MiniLM-L6-v2, or any local Hugging
    Face BERT folder or keras-hub preset name):

    ```python
    encoder = keras_cosent.models.SentenceEncoder.from_checkpoint(
        keras_cosent.models.default_checkpoint(), pooling="mean")
    embeddings = encoder.encode(["A man is playing a guitar."])
    ```

    Reference:
        [Reimers and Gurevych, 2019. Sentence-BERT](https://arxiv.org/abs/1908.10084)
    """

    def __init__(
        self,
        backbone,
        tokenizer=None,
        pooling="mean",
        max_length=128,
        exact_gelu=False,
        **kwargs,
    ):
        _check_backbone(backbone)
        if not isinstance(pooling, str) or pooling not in POOLING_LAYERS:
            raise ValueError(
                f"Unknown `pooling`={pooling!r}. Expected one of {sorted(POOLING_LAYERS)}."
            )
        exact_gelu = check_bool("exact_gelu", exact_gelu)
        max_length = sentence_preprocessing.check_max_length(max_length, backbone)
        _check_vocabulary_fits(tokenizer, backbone)
        if exact_gelu:
            # Backbone constructors hard-code their activation, so a reloaded
            # backbone comes back approximate: re-apply on every construction.
            checkpoints.set_exact_gelu(backbone)
        elif checkpoints.runs_exact_gelu(backbone):
            # Another encoder's backbone, already switched: recorded as it is, so
            # that a reload (or an export) computes what this encoder computes.
            exact_gelu = True

        # === Layers ===
        # Locals first: the torch backend forbids setting sublayers before
        # `keras.Model.__init__`; they are attached after the functional build.
        pooling_layer = get_pooling(pooling, name="pooling")
        normalization = L2Normalization(name="l2_normalization")

        # === Functional Model ===
        backbone_keys = list(backbone.input.keys())
        if "token_ids" not in backbone_keys or "padding_mask" not in backbone_keys:
            raise ValueError(
                "The backbone should take `token_ids` and `padding_mask` inputs; "
                f"{type(backbone).__name__} takes {backbone_keys}."
            )
        inputs = {
            "token_ids": keras.Input((None,), dtype="int32", name="token_ids"),
            "padding_mask": keras.Input((None,), dtype="bool", name="padding_mask"),
            "segment_ids": keras.Input((None,), dtype="int32", name="segment_ids"),
        }
        backbone_inputs = {key: inputs[key] for key in backbone_keys}
        if pooling == "first_last_avg":
            layers = checkpoints.transformer_encoder_layers(backbone)
            if not layers:
                raise ValueError(
                    "`pooling='first_last_avg'` needs a backbone of keras-hub "
                    f"`TransformerEncoder` layers; {type(backbone).__name__} has none."
                )
            # A second view of the same layers that also exposes the first
            # transformer layer's output; it shares every weight.
            features = keras.Model(
                backbone.input,
                [layers[0].output, _sequence_output(backbone.output)],
                name="first_last_features",
            )
            first, last = features(backbone_inputs)
            pooled = pooling_layer([first, last], inputs["padding_mask"])
        else:
            sequence_output = _sequence_output(backbone(backbone_inputs))
            pooled = pooling_layer(sequence_output, inputs["padding_mask"])
        outputs = normalization(pooled)
        if "segment_ids" not in backbone_keys:
            inputs.pop("segment_ids")
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        _freeze_unused_pooler(backbone)
        self.backbone = backbone
        self.pooling_layer = pooling_layer
        self.normalization = normalization
        # Tracked, so its vocabulary is saved as an asset of the `.keras` file.
        # (Set after the functional build: an unbuilt tokenizer layer would
        # make Keras warn that the model has unbuilt state.)
        self.tokenizer = tokenizer

        # === Config ===
        self.pooling = pooling
        self.max_length = max_length
        self.exact_gelu = bool(exact_gelu)
        self.embedding_dim = int(outputs.shape[-1])
        # `encode` runs the predict function; on TensorFlow make it XLA even on
        # CPU, as `compile` does (see `resolve_jit_compile`).
        if resolve_jit_compile(self) is True:
            self.jit_compile = True

    @property
    def trainable(self):
        """Settable boolean, as Keras' `Layer.trainable`; setting it leaves BERT's
        unused pooler frozen."""
        return keras.Model.trainable.fget(self)

    @trainable.setter
    def trainable(self, value):
        # Keras sets every sublayer: the unused pooler stays frozen through a
        # freeze and unfreeze of the encoder (its backbone's own setter sets it).
        keras.Model.trainable.fset(self, value)
        backbone = getattr(self, "backbone", None)  # unset during Model.__init__
        if backbone is not None:
            _freeze_unused_pooler(backbone)

    def compile(self, *args, jit_compile="auto", **kwargs):
        """`keras.Model.compile`, with XLA on for TensorFlow even on CPU.

        See `keras_cosent.models.xla.resolve_jit_compile`; pass
        `jit_compile=False` to opt out.
        """
        resolved = resolve_jit_compile(self, jit_compile, kwargs.get("run_eagerly", False))
        super().compile(*args, jit_compile=resolved, **kwargs)
        compile_config.record_jit_compile(self, jit_compile)

    def compile_from_config(self, config):
        """Compiles the model loaded from a `.keras` file as it was saved (see
        `keras_cosent.models.compile_config`)."""
        compile_config.compile_from_config(self, config)

    def call(self, inputs, training=None, mask=None):
        if isinstance(inputs, dict):
            # Callers always send segment_ids; backbones without them drop it.
            keys = [t.name for t in self.inputs]
            inputs = {k: v for k, v in inputs.items() if k in keys}
        return super().call(inputs, training=training, mask=mask)

    # === Host-side text utilities: the preprocessor's ===

    @property
    def preprocessor(self):
        """The `SentencePreprocessor` of this encoder's tokenizer and `max_length`."""
        if self.tokenizer is None:
            raise ValueError(
                "This SentenceEncoder has no tokenizer; build it with one "
                "(e.g. via `SentenceEncoder.from_checkpoint`) to embed text."
            )
        # Built on each use (a few attribute reads): it always follows `tokenizer`
        # and `max_length`, and Keras tracks nothing new on the model.
        return SentencePreprocessor(self.tokenizer, self.max_length)

    @property
    def pad_id(self):
        """The token id written into padded positions (0 without a tokenizer)."""
        return 0 if self.tokenizer is None else self.preprocessor.pad_id

    def tokenize(self, texts):
        """Tokenises sentences into `[CLS] ... [SEP]` id arrays (`SentencePreprocessor.tokenize`).

        Returns:
            A list of 1-D int32 numpy arrays, one per sentence, each at most
            `max_length` long (the end is cut, `[SEP]` kept).
        """
        return self.preprocessor.tokenize(texts)

    def preprocess(self, texts):
        """Tokenises and pads sentences into a model input dict (`SentencePreprocessor`).

        Returns:
            dict of `(batch, length)` numpy arrays `token_ids`, `padding_mask`,
            `segment_ids`.
        """
        return self.preprocessor(texts)

    def encode(self, texts, batch_size=32, progress=False, packing=None, truncate_dim=None):
        """Embeds sentences with the model in inference mode.

        On a keras-hub `BertBackbone` (the default) sentences are packed end to
        end into rows as long as the longest one (rounded up to a multiple of 8
        on JAX/TensorFlow), with attention kept inside each sentence and
        positions restarting for each, so padding costs almost nothing and
        every forward pass has one shape: a compiled backend compiles once
        per call (`keras_cosent.models.sequence_packing`). Other backbones,
        or `packing=False`, run batches of `batch_size` sentences sorted by
        length, each padded to its longest (a multiple of 8 on JAX/TensorFlow,
        one compiled function per padded length). Both give the same
        embeddings to float round-off; the result is in the input order.

        Args:
            texts: list of str.
            batch_size: int, sentences per forward pass; packed passes hold
                as many tokens as `batch_size` sentences of average length.
            progress: bool, show a `keras.utils.Progbar`; or a `Progbar` to
                advance, one bar over several calls (a corpus encoded in
                chunks).
            packing: None packs where the backbone allows it, True requires
                it (ValueError otherwise), False never packs.
            truncate_dim: None, or an int in `[1, embedding_dim]`: keep the
                first `truncate_dim` coordinates of each embedding,
                re-normalised to unit length (Matryoshka embeddings; train
                with `build(..., matryoshka_dims=...)` for them to keep
                their quality).

        Returns:
            float32 numpy array of shape `(len(texts), dim)` (`dim` is
            `truncate_dim` when given), unit-norm rows.

        Example:

        >>> import keras_hub
        >>> import keras_cosent
        >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "sat"]
        >>> encoder = keras_cosent.models.SentenceEncoder(
        ...     keras_hub.models.BertBackbone(vocabulary_size=len(vocab), num_layers=1,
        ...         num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16),
        ...     keras_hub.models.BertTokenizer(vocabulary=vocab), max_length=16)
        >>> encoder.encode(["a cat sat", "a cat"]).shape
        (2, 8)
        >>> encoder.encode(["a cat sat", "a cat"], truncate_dim=4).shape
        (2, 4)
        """
        if isinstance(batch_size, np.integer):
            batch_size = int(batch_size)
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(
                f"`batch_size` should be a positive int. Received: `batch_size`={batch_size!r}"
            )
        if packing not in (None, True, False):
            raise ValueError(
                f"`packing` should be None, True or False. Received: `packing`={packing!r}"
            )
        if not isinstance(progress, (bool, np.bool_, keras.utils.Progbar)):
            raise ValueError(
                "`progress` should be True, False or a `keras.utils.Progbar`. "
                f"Received: `progress`={progress!r}"
            )
        truncate_dim = check_truncate_dim(truncate_dim, self.embedding_dim)
        if packing is True:
            sequence_packing.check_supports_packing(self.backbone)
        token_lists, inverse = _distinct_token_lists(self.tokenize(texts))
        n = len(inverse)
        out = np.zeros((len(token_lists), self.embedding_dim), dtype="float32")
        if n == 0:
            return out[:, : truncate_dim or self.embedding_dim]
        if packing is None:
            packing = sequence_packing.supports_packing(self.backbone)
        if packing:
            batches, model = self._packed_batches(token_lists, batch_size), self._packed_model()
        else:
            batches, model = self._padded_batches(token_lists, batch_size), self
        if isinstance(progress, keras.utils.Progbar):
            bar = progress
        else:
            bar = keras.utils.Progbar(n, unit_name="sentence") if progress else None
        copies = np.bincount(inverse, minlength=len(token_lists))
        with fused_attention_at_inference(self):
            for inputs, index in batches:
                embeddings = keras.ops.convert_to_numpy(model.predict_on_batch(inputs))
                out[index] = embeddings[: len(index)]
                if bar is not None:
                    bar.add(int(copies[index].sum()))
        out = out[inverse]
        if truncate_dim is not None:
            out = keras.ops.convert_to_numpy(truncate_embeddings(out, truncate_dim))
        return out

    # The strategies live in `inference_batches`; these names stay for callers.
    def _padded_batches(self, token_lists, batch_size):
        return inference_batches.padded_batches(
            token_lists, batch_size, self.pad_id, self.max_length
        )

    def _packed_batches(self, token_lists, batch_size):
        return inference_batches.packed_batches(
            token_lists, batch_size, self.pad_id, self.max_length
        )

    def _packed_model(self):
        return inference_batches.packed_model(self)

    # === Checkpoints ===

    @classmethod
    def from_checkpoint(
        cls, path_or_preset=None, pooling=None, max_length=None, dtype=None, exact_gelu=None
    ):
        """Builds an encoder from a keras-hub preset or a Hugging Face folder.

        Args:
            path_or_preset: a local Hugging Face folder (`config.json`,
                `model.safetensors` or `pytorch_model.bin`, `vocab.txt` or a
                WordPiece `tokenizer.json`, `tokenizer_config.json`), or a
                keras-hub preset name / handle (downloaded by keras-hub).
                None uses `default_checkpoint()`.
            pooling: pooling name (see the class docstring); None reads the
                checkpoint's: a sentence-transformers folder's
                `1_Pooling/config.json`, else `"mean"`. An explicit value wins.
            max_length: int, longest token sequence including special tokens;
                None reads the checkpoint's: `max_seq_length` of a
                sentence-transformers folder's `sentence_bert_config.json`
                (or, where sentence-transformers 6 leaves it out, the
                `model_max_length` of its `tokenizer_config.json`), else 128
                (or the backbone's `max_sequence_length`, if smaller). An
                explicit value wins.
            dtype: backbone dtype or dtype policy name (e.g. `"bfloat16"`);
                None keeps the global policy.
            exact_gelu: None reads the checkpoint (`hidden_act` `"gelu"`, the
                default, or `"gelu_python"` in a Hugging Face `config.json`
                means exact; `"gelu_new"` and the other tanh forms mean
                approximate); True/False forces it.

        Returns:
            A `SentenceEncoder` with its tokenizer. A sentence-transformers
            folder read with no explicit `pooling`/`max_length` encodes as
            sentence-transformers does (the embeddings are always
            L2-normalised, so a stack without `Normalize` differs from the
            peer's in norm only).

        Raises:
            ValueError: for a sentence-transformers module stack other than
                Transformer, Pooling, Normalize (e.g. a Dense projection), an
                unsupported pooling configuration, a `max_length` beyond
                the backbone's `max_position_embeddings`, or a `hidden_act`
                other than GELU (`"relu"`, say), which keras-hub's backbone
                would replace with GELU.
            FileNotFoundError: for a local path (with a separator, or starting
                with '.') that does not exist.
            ValueError: for a file (a checkpoint is a folder; a saved encoder,
                `.keras`, loads with `keras.saving.load_model`), or a folder
                holding `encoder.keras` (a `keras-cosent train` output, which
                `keras_cosent.models.load_encoder` loads).
        """
        import keras_hub

        from keras_cosent.models import sentence_transformers_config as st_config

        if path_or_preset is None:
            path_or_preset = checkpoints.default_checkpoint()
        preset = str(path_or_preset)
        if checkpoints.is_missing_folder(preset):
            raise FileNotFoundError(
                f"`path_or_preset`={preset!r}: no such folder (a keras-hub preset is a name "
                "such as 'bert_base_en_uncased', or a 'hf://', 'kaggle://' or 'gs://' handle)"
            )
        if os.path.isfile(preset):
            # keras-hub would say the "preset" has no config.json, beside it.
            saved = (" A saved encoder (.keras) loads with keras.saving.load_model, after "
                     "`import keras_cosent`." if preset.endswith(".keras") else "")
            raise ValueError(f"`path_or_preset`={preset!r} is a file; give the checkpoint's "
                             f"folder (the one holding config.json).{saved}")
        if os.path.isfile(os.path.join(preset, "encoder.keras")):
            # A `keras-cosent train` output: keras-hub read its run config.json as
            # a checkpoint's, refused its "format" and printed the whole config.
            raise ValueError(
                f"`path_or_preset`={preset!r} holds a saved encoder (encoder.keras: a "
                "`keras-cosent train` output), not a checkpoint; load it with "
                f"keras_cosent.models.load_encoder({preset!r})."
            )
        st = st_config.read_sentence_transformers_config(preset) or {}
        # Older sentence-transformers folders keep the model in `0_Transformer/`.
        preset = st.get("transformer_dir") or preset
        hf_config = checkpoints.read_hf_json(preset, "config.json")
        if pooling is None:
            pooling = st.get("pooling") or "mean"
        if max_length is not None:
            st_config.check_max_length(max_length, hf_config, f"max_length={max_length!r}")
        elif st.get("max_length"):
            max_length = st["max_length"]
            st_config.check_max_length(
                max_length, hf_config, f"{preset}/sentence_bert_config.json"
            )
        if st.get("do_lower_case"):
            tokenizer_config = checkpoints.read_hf_json(preset, "tokenizer_config.json") or {}
            if not tokenizer_config.get("do_lower_case"):
                raise ValueError(
                    f"{preset}/sentence_bert_config.json: `do_lower_case: true` with a "
                    "tokenizer that does not lowercase is not supported; expected the "
                    "tokenizer_config.json to set `do_lower_case: true`"
                )
        # Read (and an activation other than GELU refused) even when forced.
        checkpoint_gelu = checkpoints.hidden_act_is_exact_gelu(
            hf_config, os.path.join(preset, "config.json")
        )
        if exact_gelu is None:
            exact_gelu = checkpoint_gelu
        with checkpoints.readable_checkpoint(preset) as readable:
            try:
                backbone = keras_hub.models.Backbone.from_preset(readable, dtype=dtype)
            except KeyError as error:
                if hf_config is None or error.args[0] in hf_config:
                    raise
                # keras-hub's converter reads the keys it needs with [].
                raise ValueError(f"{os.path.join(preset, 'config.json')}: no {error.args[0]!r}, "
                                 f"which keras-hub needs to build the "
                                 f"{hf_config.get('model_type')!r} backbone") from None
            except Exception as error:
                checkpoints.name_unreadable_safetensors(preset, error)
                raise
            tokenizer_cls = keras_hub.models.Tokenizer
            if checkpoints.uses_hf_bert_tokenizer(hf_config, preset):
                from keras_cosent.models.hf_bert_tokenizer import HFBertTokenizer

                tokenizer_cls = HFBertTokenizer
            kwargs = checkpoints.tokenizer_kwargs(preset)
            try:
                tokenizer = tokenizer_cls.from_preset(readable, **kwargs)
            except ValueError as error:
                # keras-hub's words name no file ("Cannot find `oov_token`...").
                if not os.path.isdir(preset):
                    raise
                source = "vocab.txt" if os.path.isfile(os.path.join(preset, "vocab.txt")) \
                    else "tokenizer.json"
                raise ValueError(f"{os.path.join(preset, source)}: {error}") from None
        if max_length is None:
            # No limit given or in the checkpoint: 128, cut to the position table.
            max_length = min(128, int(getattr(backbone, "max_sequence_length", None) or 128))
        return cls(
            backbone,
            tokenizer,
            pooling=pooling,
            max_length=max_length,
            exact_gelu=exact_gelu,
        )

    # === Serialisation ===

    def get_config(self):
        # The functional graph is rebuilt by __init__; store its arguments.
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.layers.serialize(self.backbone),
            "tokenizer": (
                None if self.tokenizer is None else keras.layers.serialize(self.tokenizer)
            ),
            "pooling": self.pooling,
            "max_length": self.max_length,
            "exact_gelu": self.exact_gelu,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.layers.deserialize(config["backbone"])
        if config.get("tokenizer") is not None:
            # Imported lazily (it needs keras-hub); importing registers it.
            from keras_cosent.models import hf_bert_tokenizer  # noqa: F401

            config["tokenizer"] = keras.layers.deserialize(config["tokenizer"])
        return cls(**config)


@contextlib.contextmanager
def fused_attention_at_inference(model):
    """Lets attention layers take the fused path while `model` runs inference.

    `keras.layers.MultiHeadAttention` only calls `ops.dot_product_attention`
    (PyTorch's `scaled_dot_product_attention`, XLA's fused attention) when its
    dropout rate is 0; BERT configs carry 0.1, so every forward pass takes the
    explicit softmax(QK^T)V path, even at inference where the dropout is the
    identity. Inside this context the rate reads 0, which changes nothing but the
    kernel; it is restored on exit, so training still drops attention weights.
    Functions traced inside it (JAX/TensorFlow predict functions) keep the fused
    path, which is correct for inference only.
    """
    layers = [
        layer
        for layer in compat.flatten_layers(model)
        if isinstance(layer, keras.layers.MultiHeadAttention)
        and compat.attention_dropout(layer) > 0.0
    ]
    rates = [compat.attention_dropout(layer) for layer in layers]
    for layer in layers:
        compat.set_attention_dropout(layer, 0.0)
    try:
        yield
    finally:
        for layer, rate in zip(layers, rates):
            compat.set_attention_dropout(layer, rate)


def _check_vocabulary_fits(tokenizer, backbone):
    """Raises if `tokenizer` makes ids that `backbone` has no embedding row for.

    JAX gathers out-of-range rows as NaN and the other backends fail inside
    the step, so a tokenizer paired with another checkpoint's backbone is
    refused here. A tokenizer without its vocabulary yet (a `.keras` file's
    is loaded after construction) is not checked.
    """
    # The embedding layer itself: backbones name its size differently
    # (`ElectraBackbone` has `vocab_size`, most others `vocabulary_size`).
    rows = getattr(getattr(backbone, "token_embedding", None), "input_dim", None)
    if tokenizer is None or not isinstance(rows, int):
        return
    try:
        size = tokenizer.vocabulary_size()
    except (ValueError, AttributeError, TypeError):
        return  # no vocabulary set yet
    if isinstance(size, int) and size > rows:
        raise ValueError(
            f"The tokenizer's vocabulary has {size} tokens but the backbone's token "
            f"embedding has {rows} rows: ids {rows} to {size - 1} have no embedding. "
            "Pair the tokenizer with the backbone of the same checkpoint."
        )


def _freeze_unused_pooler(backbone):
    """Makes a BERT backbone's pooler (`pooled_dense`) non-trainable.

    No pooling mode reads it. Trainable, it got no gradient: Keras warned on every
    training step on TensorFlow and PyTorch, and JAX, which hands it zeros, let
    AdamW decay it. Frozen, it keeps the checkpoint's values on every backend, as
    PyTorch's AdamW leaves sentence-transformers' pooler. Run on every construction
    (a reloaded backbone comes back trainable) and whenever the encoder's
    `trainable` is set; `backbone.trainable = True` makes the pooler trainable.
    """
    for layer in backbone.layers:
        if layer.name == "pooled_dense":
            layer.trainable = False


def _sequence_output(outputs):
    # BERT-like backbones return a dict, others (RoBERTa, DistilBERT) a tensor.
    if isinstance(outputs, dict):
        return outputs["sequence_output"]
    return outputs


def _distinct_token_lists(token_lists):
    """`(distinct, inverse)`: each token sequence once, and the index of every input
    sequence's copy in `distinct` (`distinct[inverse[i]]` equals `token_lists[i]`).

    Texts that tokenize alike (the same sentence twice, or two that differ only in
    case or in what truncation cut) are embedded once and so get one embedding:
    on TensorFlow, a sequence run in two different batches came out 1e-7 apart,
    and pairs of such texts, ties in truth, were ranked by that noise.
    """
    positions, distinct = {}, []
    inverse = np.empty(len(token_lists), dtype=np.int64)
    for i, tokens in enumerate(token_lists):
        tokens = np.asarray(tokens)
        key = (tokens.dtype.str, tokens.tobytes())
        position = positions.setdefault(key, len(distinct))
        if position == len(distinct):
            distinct.append(tokens)
        inverse[i] = position
    return distinct, inverse
