"""stepview's own vLLM: the engine it starts, configures and drives.

``vllm_engine``
    :class:`~stepview.engine.own.vllm_engine.VllmEngine`, vLLM's ``LLMEngine`` behind the
    driver's :class:`~stepview.model.engine_api.Engine` protocol, with its converters
    ``vllm_logprobs`` (lazy logprob views) and ``vllm_stats`` (a stat logger of stepview's).
``core_link``
    how the plug-in's records reach it, with the engine core in this process (a listener)
    or in its own (a private ipc subscription), matched to the step whose outputs they go with.
``engine_args``
    vLLM's flags parsed by vLLM's own parser, plus the built-in models' CPU-friendly defaults.
``environment``
    what must be set before ``import vllm``, and keeping vLLM's output off the terminal.
``builtin_models``
    which built-in model runs when ``--model`` names none (``demo-smollm2``; ``demo-tiny`` when
    asked, or when SmolLM2's package is missing), with its engine defaults; imports no vLLM.
``tiny_model`` / ``smollm2`` / ``model_cache``
    the two built-in models: random weights (real scheduling on any CPU, no download), and
    SmolLM2-135M-Instruct converted once from its GGUF file; both built once into the user
    cache, atomically, and rebuilt when broken.
``phases``
    start-up progress from vLLM's own log lines: the phases the loading view names.
``vllm_times``
    vLLM's own times for a request (first scheduled, first token), read from its stats once
    per request, so queue time does not include the prefill.
``live``
    the live source: a driver whose engine is built (slowly) on the driver thread.
``shutdown``
    vLLM's engine shut down on the way out, within the stop deadline (without the full
    garbage collections vLLM runs for a process that goes on).
``processes``
    the processes the engine started (its core, the core's worker), and ending them when the
    engine does not stop: vLLM only does it from the engine's own thread, which may be stuck.
``core_stacks``
    the engine core's thread stacks for a flight recording: asked for with a signal the
    core's plug-in answers (it writes them into a folder made here), or why there are none.

Every module imports vLLM lazily, inside functions, so the TUI can draw before vLLM loads.
"""
