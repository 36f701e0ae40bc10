"""Attention, from first principles: reference code for the course's ten chapters.

The floors, from the ground up (each imports only from the floors below it):

    core         the neutral ground: model configs, the registries of cells and score functions, the
                 layer-stack rule, seeded initial values, shape checks, calls in batches
    data         generated, seeded data sets (dates, toy sequence tasks, translation, planted words,
                 captioned shapes, bAbI-like stories, bit sequences), vocabularies, padding
    training     the one training loop every task on either track uses; decoding: what greedy
                 decoding returns
    numpy_track  layers and models with hand-written forward and backward passes in NumPy
    torch_track  the same layers and models as torch modules (a sibling of numpy_track: neither
                 imports the other)
    tracks       the registry of tracks that the tasks, the command line, checkpoints and the
                 explorer consult instead of asking which track they hold
    convert      weights between the tracks, and between the NumPy layers and torch.nn's modules
    checkpoint   one checkpoint format both tracks read and write
    tasks        the registry of tasks (sequence pairs, the NTM's copy task, chapter 9's
                 classification, captioning and question answering), one module each, and
                 chapter 9's experiments
    cli, viz, book
                 the command line, heat maps and the widget explorer, the book's helpers
    testing      numerical gradient checks and assertions for the tests and exercises (nothing above
                 imports it)

``applications`` and ``ntm_copy`` are the old names of ``tasks`` and ``tasks.copy``, kept for code
written against them.
"""

__version__ = "0.1.0"
