"""The watched server's OpenAI-compatible HTTP API, over the standard library alone.

``server_api``
    :class:`~stepview.engine.watch.api.server_api.ServerApi`: prompts sent with the add
    form's parameters, the served model, ``/detokenize``, and how a call failed in words.
``api_key``
    the key a server started with ``--api-key`` wants: from the environment or a file,
    never shown, and the message when the server refuses it.
"""
