"""The old name of ``attention_course.tasks.copy`` (the NTM's copy task), kept so that code written
against it still runs. New code imports ``attention_course.tasks.copy``."""

from .tasks.copy import (COPY_FORMAT, COPY_MODELS, CopyTrainConfig, CopyTrainResult, bit_accuracy, build_copy_model,
                         copy_model_config, evaluate_lengths, load_copy_checkpoint, predict, save_copy_checkpoint,
                         threads, train_copy)

__all__ = ["COPY_FORMAT", "COPY_MODELS", "CopyTrainConfig", "CopyTrainResult", "copy_model_config", "build_copy_model",
           "threads", "bit_accuracy", "predict", "evaluate_lengths", "train_copy", "save_copy_checkpoint",
           "load_copy_checkpoint"]
