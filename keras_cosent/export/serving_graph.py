"""The TensorFlow serving graph of a sentence encoder: its SavedModel signatures.

`write_serving_saved_model` runs under the TensorFlow backend only (the public
`keras_cosent.export.export_saved_model` gets there through a subprocess from
the other backends). It wraps the encoder in a `keras.export.ExportArchive`
with three signatures:

- `serving_default`: `sentences` (tf.string `[None]`) -> `embeddings`
  (float32 `[None, dim]`, L2-normalised; with `truncate_dim`, the first
  `truncate_dim` coordinates re-normalised, in every signature). Tokenisation runs in the graph with
  the encoder's own keras-hub tokenizer (TensorFlow Text ops), truncated to
  `max_length` and padded only to the longest sentence of the request.
- `encode_tokens`: `token_ids`, `padding_mask`, `segment_ids` (all int32
  `[None, None]`; `padding_mask` is 1 for real tokens, 0 for padding) ->
  `embeddings`. Core TensorFlow ops only, so any TF Serving build can run it.
- `similarity`: `sentences1`, `sentences2` (tf.string `[None]`) -> `cosine`
  (float32 `[None]`), the cosine of each aligned pair.

The encoder only needs the `keras_cosent.models.SentenceEncoder` surface: it is
called on `{token_ids, padding_mask, segment_ids}` and has `.tokenizer`,
`.max_length` and `.pad_id` (and `.embedding_dim` for `truncate_dim`).
"""

import keras

from keras_cosent.models.hf_bert_tokenizer import HFBertTokenizer
from keras_cosent.models.sentence_preprocessing import check_max_length
from keras_cosent.models.sentence_preprocessing import special_token_ids
from keras_cosent.utils.truncation import check_truncate_dim
from keras_cosent.utils.truncation import truncate_embeddings

SIGNATURE_SENTENCES = "serving_default"
SIGNATURE_TOKENS = "encode_tokens"
SIGNATURE_SIMILARITY = "similarity"
OUTPUT_EMBEDDINGS = "embeddings"
OUTPUT_COSINE = "cosine"


def resolve_max_length(encoder, max_length=None):
    """The sequence length the export truncates to: `max_length` or the encoder's.

    The same rule as `SentenceEncoder` (`sentence_preprocessing.check_max_length`):
    an integer in `[3, max_sequence_length]` of the backbone, else `ValueError`.
    """
    value = encoder.max_length if max_length is None else max_length
    return check_max_length(value, getattr(encoder, "backbone", None))


NO_TOKENIZER = (
    "The encoder has no tokenizer, so the string signatures cannot be "
    "built; create it with `SentenceEncoder.from_checkpoint`, or pass "
    "`string_signatures=False` to export `encode_tokens` only."
)


def check_tokenizer_for_strings(encoder):
    """Refuses the string signatures of an encoder without a tokenizer."""
    if encoder.tokenizer is None:
        raise ValueError(NO_TOKENIZER)


def write_serving_saved_model(
    encoder, export_dir, max_length=None, string_signatures=True, truncate_dim=None
):
    """Writes the serving SavedModel of `encoder` into `export_dir` (TF backend only).

    Args:
        encoder: a `keras_cosent.models.SentenceEncoder`.
        export_dir: a new or empty directory.
        max_length: sequence length to truncate to; `None` keeps
            `encoder.max_length`.
        string_signatures: include `serving_default` (sentences) and
            `similarity`, which need TensorFlow Text ops. With `False` the
            model has core ops only: `encode_tokens`, also as `serving_default`.
        truncate_dim: `None`, or an int in `[1, encoder.embedding_dim]`: the
            signatures serve the first `truncate_dim` coordinates, re-normalised.

    Returns:
        The `max_length` the signatures truncate to.
    """
    if keras.backend.backend() != "tensorflow":
        raise RuntimeError(
            "`write_serving_saved_model` builds a TensorFlow graph and needs "
            f"KERAS_BACKEND=tensorflow; the backend is {keras.backend.backend()!r}. "
            "Use `keras_cosent.export.export_saved_model`, which handles this."
        )
    import tensorflow as tf

    from keras_cosent.models.sentence_encoder import SentenceEncoder

    if not isinstance(encoder, SentenceEncoder):
        raise ValueError(
            f"`encoder` should be a keras_cosent SentenceEncoder. Received: a "
            f"{type(encoder).__name__}"
        )
    max_length = resolve_max_length(encoder, max_length)
    if truncate_dim is not None:
        truncate_dim = check_truncate_dim(truncate_dim, encoder.embedding_dim)
    tokenizer = encoder.tokenizer
    if string_signatures:
        check_tokenizer_for_strings(encoder)
        cls_id, sep_id = special_token_ids(tokenizer)
        pad_id = int(encoder.pad_id)

    def embed(token_ids, padding_mask, segment_ids):
        inputs = {
            "token_ids": token_ids,
            "padding_mask": padding_mask,
            "segment_ids": segment_ids,
        }
        embeddings = tf.cast(encoder(inputs, training=False), tf.float32)
        if truncate_dim is not None:
            embeddings = truncate_embeddings(embeddings, truncate_dim)
        return embeddings

    # keras-hub's WordPiece tokenizers split at a NUL character when they run in
    # Python (as `encode` runs them), but TensorFlow Text's regex split in the graph
    # ends the string there: the graph gets a space in its place, so that both cut
    # the sentence into the same words. (HFBertTokenizer drops NUL on both paths.)
    # A byte-pair tokenizer's graph ends the string at NUL too, where Python reads
    # it as a byte of its own: a space is the nearer (the one text where serving
    # and `encode` still differ). SentencePiece reads NUL alike on both paths, so
    # its sentences are left as they are (a space in their place was served as
    # another sentence, cosine 0.89 to `encode`'s).
    import keras_hub

    split_at_nul = (
        string_signatures
        and isinstance(tokenizer, (keras_hub.tokenizers.WordPieceTokenizer,
                                   keras_hub.tokenizers.BytePairTokenizer))
        and not isinstance(tokenizer, HFBertTokenizer)
    )

    def tokenize(sentences):
        # Same layout as `SentenceEncoder.tokenize` + `pad_batch`:
        # [CLS] wordpieces[:max_length - 2] [SEP], padded to the longest row.
        if split_at_nul:
            sentences = tf.strings.regex_replace(sentences, r"\x00", " ")
        pieces = tokenizer.tokenize(sentences)[:, : max_length - 2]
        rows = pieces.nrows()
        cls = tf.fill([rows, 1], tf.constant(cls_id, pieces.dtype))
        sep = tf.fill([rows, 1], tf.constant(sep_id, pieces.dtype))
        ids = tf.concat([cls, pieces, sep], axis=1)
        token_ids = tf.cast(ids.to_tensor(default_value=pad_id), tf.int32)
        padding_mask = tf.sequence_mask(ids.row_lengths(), tf.shape(token_ids)[1])
        return token_ids, padding_mask, tf.zeros_like(token_ids)

    def serve_sentences(sentences):
        return {OUTPUT_EMBEDDINGS: embed(*tokenize(sentences))}

    def serve_tokens(token_ids, padding_mask, segment_ids):
        mask = tf.not_equal(padding_mask, 0)
        return {OUTPUT_EMBEDDINGS: embed(token_ids, mask, segment_ids)}

    def serve_similarity(sentences1, sentences2):
        check = tf.debugging.assert_equal(
            tf.shape(sentences1), tf.shape(sentences2),
            message="`sentences1` and `sentences2` should have the same length",
        )  # fmt: skip
        with tf.control_dependencies([check]):
            both = tf.concat([sentences1, sentences2], 0)
        # One backbone pass over both columns; masked pooling makes the extra
        # padding of the shorter column harmless.
        embeddings = embed(*tokenize(both))
        first, second = tf.split(embeddings, 2, axis=0)
        return {OUTPUT_COSINE: tf.reduce_sum(first * second, axis=-1)}

    def spec(shape, dtype, name):
        return tf.TensorSpec(shape, dtype, name=name)

    if not encoder.built:
        # A subclassed encoder that was never called has no variables yet.
        dummy = tf.ones([1, 2], tf.int32)
        embed(dummy, tf.ones_like(dummy, tf.bool), tf.zeros_like(dummy))

    archive = keras.export.ExportArchive()
    archive.track(encoder)
    sentence_spec = [spec([None], tf.string, "sentences")]
    token_specs = [
        spec([None, None], tf.int32, "token_ids"),
        spec([None, None], tf.int32, "padding_mask"),
        spec([None, None], tf.int32, "segment_ids"),
    ]
    pair_specs = [spec([None], tf.string, "sentences1"), spec([None], tf.string, "sentences2")]
    if string_signatures:
        archive.add_endpoint(SIGNATURE_SENTENCES, serve_sentences, input_signature=sentence_spec)
        archive.add_endpoint(SIGNATURE_TOKENS, serve_tokens, input_signature=token_specs)
        archive.add_endpoint(SIGNATURE_SIMILARITY, serve_similarity, input_signature=pair_specs)
    else:
        # The first endpoint doubles as serving_default (ExportArchive's rule).
        archive.add_endpoint(SIGNATURE_TOKENS, serve_tokens, input_signature=token_specs)
    archive.write_out(str(export_dir), verbose=False)
    return max_length
