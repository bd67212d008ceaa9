"""A keras-hub `BertTokenizer` that normalises text as Hugging Face's BERT tokenizer does.

keras-hub lowercases with TensorFlow Text's `case_fold_utf8`, which is NFKC
case folding: it also rewrites compatibility characters, so the full-width
comma "，" becomes "," and "ｆｕｌｌ" becomes "full", and it turns non-breaking
and ideographic spaces into spaces. Hugging Face's `BertTokenizer` (the Rust
`BertNormalizer`, which sentence-transformers uses) instead

1. drops control and format characters (`\\x00`, U+FFFD, categories Cc except
   tab/newline/return, Cf, Co), so "a\\u200bb" reads "ab",
2. turns every other whitespace character into a space,
3. strips accents (NFD, then drops nonspacing marks) and lowercases each
   character on its own: no NFKC, and "Σ" is always "σ", never the final "ς".

A checkpoint trained with Hugging Face's tokenizer sees different ids under
keras-hub's on any text with compatibility characters: 48 of the 800 Chinese
STS-B test sentences (full-width punctuation). `HFBertTokenizer` does steps 1-3
itself (in TensorFlow ops inside a graph, so exported SavedModels agree, and in
Python otherwise) and hands keras-hub the rest (CJK and punctuation splitting,
accent stripping, WordPiece) with keras-hub's own lowercasing off.
"""

import unicodedata

import keras_hub
import numpy as np

from keras_cosent.api_export import keras_cosent_export

# Removed before tokenising, as Hugging Face's `_clean_text` does: NUL, U+FFFD,
# control characters other than tab / newline / return, format characters
# (zero-width space, soft hyphen, ...) and private use characters. (Unassigned
# code points, which Hugging Face also drops, are kept: RE2 has no \p{Cn}.)
_DROPPED_TF = r"[\x{0}-\x{8}\x{B}\x{C}\x{E}-\x{1F}\x{7F}-\x{9F}\p{Cf}\p{Co}\x{FFFD}]"


def _normalize_char(c):
    if c in "\t\n\r":
        return " "
    if c == "\ufffd" or unicodedata.category(c)[0] == "C":
        return ""
    if c.isspace():
        return " "
    return c.lower()


def normalize_python(text):
    """Steps 1-3 of the module docstring (without accents) on one Python str."""
    return "".join(_normalize_char(c) for c in text)


def normalize_tf(text):
    """Steps 1-3 of the module docstring (without accents) on a string `tf.Tensor`."""
    import tensorflow as tf

    text = tf.strings.regex_replace(text, _DROPPED_TF, "")
    text = tf.strings.regex_replace(text, r"[\s\p{Z}]", " ")
    # Lowercase character by character: `tf.strings.lower` on whole strings
    # would apply the final-sigma rule that Hugging Face does not.
    chars = tf.strings.unicode_split(text, "UTF-8")
    chars = tf.ragged.map_flat_values(tf.strings.lower, chars, encoding="utf-8")
    return tf.strings.reduce_join(chars, axis=-1)


def _normalize_any(inputs):
    """Normalises str, bytes, (nested) lists/tuples, numpy arrays or TF tensors."""
    if isinstance(inputs, str):
        return normalize_python(inputs)
    if isinstance(inputs, bytes):
        return normalize_python(inputs.decode("utf-8"))
    if isinstance(inputs, (list, tuple)):
        return [_normalize_any(x) for x in inputs]
    if isinstance(inputs, np.ndarray):
        return _normalize_any(inputs.tolist())
    import tensorflow as tf

    if isinstance(inputs, tf.RaggedTensor):
        return tf.ragged.map_flat_values(normalize_tf, inputs)
    return normalize_tf(tf.convert_to_tensor(inputs))


@keras_cosent_export
class HFBertTokenizer(keras_hub.models.BertTokenizer):
    """keras-hub's `BertTokenizer`, lowercasing as Hugging Face's `BertTokenizer` does.

    With `lowercase=True`, text is cleaned (control and format characters
    dropped, whitespace made spaces) and lowercased character by character
    without NFKC, as in `transformers`; keras-hub's own NFKC case folding is
    not used. With `lowercase=False` it is keras-hub's tokenizer unchanged.
    `SentenceEncoder.from_checkpoint` uses it for lowercasing BERT checkpoints
    in Hugging Face format.

    Args:
        vocabulary: list of str or a path to a vocabulary file (one token per
            line), as for `keras_hub.models.BertTokenizer`.
        lowercase: bool. Clean and lowercase like Hugging Face.
        **kwargs: `keras_hub.models.BertTokenizer` arguments (`strip_accents`,
            `split_on_cjk`, ...).

    Example:

    >>> from keras_cosent.models import HFBertTokenizer
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", ",", "，"]
    >>> tokenizer = HFBertTokenizer(vocabulary=vocab, lowercase=True)
    >>> [int(i) for i in tokenizer(["A，B"])[0]]  # keras-hub alone gives [5, 7, 6]
    [5, 8, 6]
    >>> [int(i) for i in tokenizer(["a\\u200bb"])[0]]  # zero-width space dropped
    [1]
    """

    def __init__(self, vocabulary=None, lowercase=False, **kwargs):
        super().__init__(vocabulary=vocabulary, lowercase=False, **kwargs)
        self.hf_lowercase = bool(lowercase)

    def tokenize(self, inputs):
        if self.hf_lowercase:
            inputs = _normalize_any(inputs)
        return super().tokenize(inputs)

    def get_config(self):
        config = super().get_config()
        config["lowercase"] = self.hf_lowercase
        return config
