"""One request in full (``enter``): ``screen`` (prompt, parameters, timings, each completion as
it streams), ``heatmap`` (tokens coloured by probability, the cursor's alternatives) and
``strip`` (its life over steps: waiting, prefill chunks, decode, preemptions)."""
