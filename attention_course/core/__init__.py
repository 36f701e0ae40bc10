"""The ground floor both tracks stand on. It imports neither track, and nothing from ``testing``.

Modules:
    configs       the model configuration (``Seq2seqConfig``), a dataclass both tracks build from
    registries    the recurrent cells and score functions by name: their gates, parameters and rules
                  (which widths a score needs, the GRU's gate convention against ``torch.nn.GRU``)
    layer_stack   the rule that stacks recurrent layers (bidirectional, residual from layer 2 on)
    initializers  seeded initial values as plain NumPy arrays, so both tracks start from identical
                  weights for a seed without building each other's layers
    shapes        shape and dtype checks whose errors name the argument, the expected and the got
    batches       calling a function a chunk of rows at a time (each track's ``call`` predicts so)
    schedules     learning-rate schedules as pure factors (the Transformer's warm-up, then 1/sqrt(step))

``numpy_track`` and ``torch_track`` import from here; neither imports the other.
"""
