"""Property-based fuzzing of every parser of outside input (Hypothesis).

Each test feeds one parser input that looks valid (a real sample, mutated) and input that is
broken (random bytes and text), and asserts that the parser returns a value or raises the
one error type its caller turns into one line: never another exception, never a hang (each
input bounded in size, each example under a generous deadline), never unbounded memory (the
peak traced while parsing stays under a bound far above what the input needs).

The suite runs the ``quick`` profile (a few examples per parser, under a minute on two cores);
``python -m benchmarks fuzz --minutes N`` runs the ``long`` one for N minutes, seed after
seed. Profiles: :mod:`tests.fuzz.profiles`; samples and mutations: :mod:`tests.fuzz.inputs`.
"""
