"""keras_cosent.data: readers for STS, NLI and text corpora, and padded pair batches."""

from keras_cosent.data.data_format_error import DataFormatError
from keras_cosent.data.padding import pad_batch
from keras_cosent.data.padding import padded_length
from keras_cosent.data.pair_dataset import PairDataset
from keras_cosent.data.readers import READ_FORMATS
from keras_cosent.data.readers import read_columns
from keras_cosent.data.readers import read_dataset
from keras_cosent.data.readers import read_nli_jsonl
from keras_cosent.data.readers import read_pair_tsv
from keras_cosent.data.readers import read_sts_benchmark
from keras_cosent.data.readers import read_text_lines
from keras_cosent.data.pair_batches import PairBatches
from keras_cosent.data.multi_batches import MultiBatches
from keras_cosent.data.beir import RetrievalDataset
from keras_cosent.data.beir import hold_out_queries
from keras_cosent.data.beir import read_beir
from keras_cosent.data.beir import read_retrieval_files
from keras_cosent.data.beir import read_retrieval_triplets
from keras_cosent.data.beir import write_retrieval_triplets

__all__ = [
    "DataFormatError",
    "pad_batch",
    "padded_length",
    "PairDataset",
    "READ_FORMATS",
    "read_columns",
    "read_dataset",
    "read_nli_jsonl",
    "read_pair_tsv",
    "read_sts_benchmark",
    "read_text_lines",
    "PairBatches",
    "MultiBatches",
    "RetrievalDataset",
    "hold_out_queries",
    "read_beir",
    "read_retrieval_files",
    "read_retrieval_triplets",
    "write_retrieval_triplets",
]
