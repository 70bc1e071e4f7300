"""`evalkit serve`: an OpenAI-compatible HTTP server over the in-process engine.

`engine_loop` owns the engine on one thread (continuous batching: requests join the running
batch between steps); `app` is the FastAPI front end; `protocol` the request/response shapes.
"""
