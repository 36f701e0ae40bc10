"""Generated, seeded data sets, vocabularies (of characters or words), padding and batching.

Modules:
    vocab           character- and word-level vocabularies, padding, teacher-forcing
                    batches, batch iteration
    dates           human-written dates to ISO ``YYYY-MM-DD`` (the attention demo)
    toy             copy / reverse / sort tasks (the bottleneck chapter)
    tsv             read and write (source, target) pairs as tab-separated text
    translation     word-level translation between two generated languages whose word
                    orders differ, with gold word alignments that cross
    classification  filler words with planted words that decide the label (attention pooling)
    captions        images of coloured shapes with captions and object masks (visual attention)
    babi            bAbI-like stories, questions and supporting facts (memory networks)
    copy_task       the Neural Turing Machine's copy task on random bit vectors

Everything is deterministic given a seed, and nothing is downloaded.
"""

from attention_course.data.babi import (
    BABI_KINDS,
    BABI_VOCABULARY,
    BabiBatch,
    BabiExample,
    encode_babi,
    generate_babi,
)
from attention_course.data.captions import (
    CAPTION_VOCABULARY,
    CaptionData,
    encode_captions,
    generate_captions,
    grid_coverage,
)
from attention_course.data.classification import (
    CLASSIFICATION_TASKS,
    CLASSIFICATION_VOCABULARY,
    ClassificationData,
    generate_classification,
    rule_label,
)
from attention_course.data.copy_task import CopyTaskData, generate_copy_task
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
from attention_course.data.translation import (
    alignment_matrix,
    count_crossings,
    generate_translation,
    translate,
    word_alignment,
)
from attention_course.data.tsv import DataFormatError, load_pairs_tsv, save_pairs_tsv
from attention_course.data.vocab import (
    ParallelBatch,
    UnknownCharacterError,
    UnknownWordError,
    Vocabulary,
    build_vocabularies,
    encode_pairs,
    iterate_batches,
    pad_batch,
)

__all__ = [
    "BABI_KINDS",
    "BABI_VOCABULARY",
    "CAPTION_VOCABULARY",
    "CLASSIFICATION_TASKS",
    "CLASSIFICATION_VOCABULARY",
    "DATE_FORMATS",
    "MAX_SOURCE_LENGTH",
    "TWO_DIGIT_YEAR_FORMATS",
    "TOY_TASKS",
    "BabiBatch",
    "BabiExample",
    "CaptionData",
    "ClassificationData",
    "CopyTaskData",
    "DataFormatError",
    "ParallelBatch",
    "UnknownCharacterError",
    "UnknownWordError",
    "Vocabulary",
    "alignment_matrix",
    "build_vocabularies",
    "count_crossings",
    "encode_babi",
    "encode_captions",
    "encode_pairs",
    "expand_two_digit_year",
    "generate_babi",
    "generate_captions",
    "generate_classification",
    "generate_copy_task",
    "generate_dates",
    "generate_toy_splits",
    "generate_toy_task",
    "generate_translation",
    "grid_coverage",
    "iterate_batches",
    "load_pairs_tsv",
    "pad_batch",
    "rule_label",
    "save_pairs_tsv",
    "to_iso",
    "translate",
    "usable_formats",
    "word_alignment",
]
