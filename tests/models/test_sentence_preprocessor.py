"""SentencePreprocessor: framing, truncation, padding, errors, and the encoder delegating to it."""

import doctest

import numpy as np
import pytest

from keras_cosent.models import SentenceEncoder
from keras_cosent.models import SentencePreprocessor
from keras_cosent.models import sentence_preprocessor

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat"]


def _tokenizer():
    import keras_hub

    return keras_hub.models.BertTokenizer(vocabulary=VOCAB, lowercase=True)


def test_frames_truncates_and_pads():
    preprocessor = SentencePreprocessor(_tokenizer(), max_length=5)
    ids = preprocessor.tokenize(["The cat sat on the mat", "cat", ""])
    # [CLS] + at most 3 tokens + [SEP]; empty is [CLS][SEP].
    assert [i.tolist() for i in ids] == [[2, 5, 6, 7, 3], [2, 6, 3], [2, 3]]
    # Never padded beyond max_length.
    assert preprocessor(["the cat"])["padding_mask"].shape[1] <= 5
    preprocessor = SentencePreprocessor(_tokenizer(), max_length=16)
    batch = preprocessor(["The cat sat on the mat", "cat"])
    expected_mask = np.zeros((2, 8), bool)
    expected_mask[0, :8], expected_mask[1, :3] = True, True
    np.testing.assert_array_equal(batch["padding_mask"], expected_mask)
    np.testing.assert_array_equal(batch["token_ids"][1], [2, 6, 3, 0, 0, 0, 0, 0])


def test_the_encoder_delegates_to_its_preprocessor():
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(VOCAB), num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=16)
    encoder = SentenceEncoder(backbone, _tokenizer(), max_length=6)
    assert isinstance(encoder.preprocessor, SentencePreprocessor)
    assert encoder.preprocessor.max_length == 6
    texts = ["the cat sat on the mat", "mat"]
    expected = SentencePreprocessor(_tokenizer(), 6)(texts)
    got = encoder.preprocess(texts)
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key])


@pytest.mark.parametrize(
    "texts,error,match",
    [("the cat", TypeError, "Wrap it in a list"), (["the", 3], TypeError, "item 1 is int")],
)
def test_bad_texts_are_named(texts, error, match):
    with pytest.raises(error, match=match):
        SentencePreprocessor(_tokenizer()).tokenize(texts)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="`max_length`=2"):
        SentencePreprocessor(_tokenizer(), max_length=2)
    with pytest.raises(ValueError, match="tokenizer"):
        SentencePreprocessor(None)
    with pytest.raises(ValueError, match="empty"):
        SentencePreprocessor(_tokenizer())([])


def test_a_tokenizer_that_pads_itself_is_refused():
    # Its pad ids would sit inside [CLS] ... [SEP], marked as tokens.
    import keras_hub

    tokenizer = keras_hub.models.BertTokenizer(vocabulary=VOCAB, sequence_length=6)
    with pytest.raises(ValueError, match="sequence_length=6"):
        SentencePreprocessor(tokenizer, max_length=16)


def test_docstring_example_runs():
    result = doctest.testmod(sentence_preprocessor, verbose=False)
    assert result.attempted > 0 and result.failed == 0
