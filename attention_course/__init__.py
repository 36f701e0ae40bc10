"""Attention, from first principles: reference code for the course.

The floors, from the ground up (each imports only from the floors below it):

    core         the neutral ground: model configs, the registries of cells and score functions, the
                 layer-stack rule, seeded initial values, shape checks
    data         generated, seeded data sets (dates, toy sequence tasks), vocabularies, padding
    training     the training loop both tracks share; decoding: what greedy decoding returns
    numpy_track  layers with hand-written forward and backward passes in NumPy
    torch_track  the same layers as torch modules (a sibling of numpy_track: neither imports the other)
    tracks       the registry of tracks that the command line, checkpoints and the explorer consult
    convert      weights between the tracks, and between the NumPy layers and torch.nn's modules
    checkpoint, cli, viz, book
                 checkpoints, the command line, heat maps and the widget explorer, the book's helpers
    testing      numerical gradient checks and assertions for the tests and exercises (nothing above
                 imports it)
"""

__version__ = "0.1.0"
