"""Attention, from first principles: reference code for the course.

Subpackages:
    numpy_track  layers with hand-written forward and backward passes in NumPy
    data         generated, seeded data sets (dates, toy sequence tasks), vocabularies, padding
    testing      numerical gradient checks and shape assertions
    viz          attention heat maps
"""

__version__ = "0.1.0"
