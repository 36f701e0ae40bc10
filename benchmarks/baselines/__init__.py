"""Baselines the benchmarks measure the course code against.

    repeat_attention      the step-by-step NumPy attention of "Deep Learning from Scratch 2",
                          ch. 8 (``repeat`` then multiply then sum), the slow reference point
                          for the attention speed benchmark
    plain_torch_seq2seq   an idiomatic PyTorch GRU seq2seq with additive attention on the dates
                          task, the reference point for the time-to-accuracy benchmark

These files are not part of the ``attention_course`` package: they exist to be measured, so
they are written the way an ordinary user would write them, not the way the course does.
"""
