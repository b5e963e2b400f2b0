"""Background jobs: plain callables a worker runs off the hot path.

* :class:`~engram.workers.insights.InsightWriter` (``run_user``): insights about a user;
* :class:`~engram.workers.multifact.MultiFactPass` (``run_turn``, ``run_message``): the
  facts a long user turn states.
"""
