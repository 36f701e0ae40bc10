"""Chapter 9, attention at work: three tasks that train with either track and say where the attention lands.

It sits above both tracks, like ``attention_course.tracks``: it builds a track's model, trains it
with the shared loop (``attention_course.training``) and measures it. Each task module has a
``train(...)`` that returns a ``TaskRun`` (the model, its JSON summary, the data it was measured
on) and a ``train_command(args)`` for ``attention-course train --task <name>``.

Modules:
    common              training either track's model on arrays; options that apply; summaries
    classify            attention pooling for classification (planted words decide the label)
    caption             soft visual attention for image captioning (Xu et al. 2015)
    question_answering  end-to-end memory networks on bAbI-like stories (Sukhbaatar et al.
                        2015); the command line's ``--task babi``
    experiments         the chapter's comparisons over seeds, written to a JSON file for the book

Torch is imported only when the torch track is asked for.
"""
