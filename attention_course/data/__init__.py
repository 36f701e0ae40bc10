"""Generated, seeded data sets, character vocabularies, padding and batching.

Modules:
    vocab  character vocabularies, padding, teacher-forcing batches, batch iteration
    dates  human-written dates to ISO ``YYYY-MM-DD`` (the attention demo)
    toy    copy / reverse / sort tasks (the bottleneck chapter)
    tsv    read and write (source, target) pairs as tab-separated text

Everything is deterministic given a seed, and nothing is downloaded.
"""

from attention_course.data.dates import (
    DATE_FORMATS,
    MAX_SOURCE_LENGTH,
    TWO_DIGIT_YEAR_FORMATS,
    expand_two_digit_year,
    generate_dates,
    to_iso,
    usable_formats,
)
from attention_course.data.toy import TOY_TASKS, generate_toy_splits, generate_toy_task
from attention_course.data.tsv import DataFormatError, load_pairs_tsv, save_pairs_tsv
from attention_course.data.vocab import (
    ParallelBatch,
    UnknownCharacterError,
    Vocabulary,
    build_vocabularies,
    encode_pairs,
    iterate_batches,
    pad_batch,
)

__all__ = [
    "DATE_FORMATS",
    "MAX_SOURCE_LENGTH",
    "TWO_DIGIT_YEAR_FORMATS",
    "TOY_TASKS",
    "DataFormatError",
    "ParallelBatch",
    "UnknownCharacterError",
    "Vocabulary",
    "build_vocabularies",
    "encode_pairs",
    "expand_two_digit_year",
    "generate_dates",
    "generate_toy_splits",
    "generate_toy_task",
    "iterate_batches",
    "load_pairs_tsv",
    "pad_batch",
    "save_pairs_tsv",
    "to_iso",
    "usable_formats",
]
