"""The modal screens: ``add_form`` (a prompt and every sampling field, checked by vLLM's rules,
with ``presets``), ``adding`` (every way a request gets added goes through it), ``load_form``
(``w``: a synthetic load), ``goto`` (``:``) and ``help`` (``?``, built from the bindings)."""
