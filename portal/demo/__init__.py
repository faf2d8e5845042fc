"""`make demo` (`manage.py demo`): the one-process runtime of the embedded mode and the simulated node
agents that make its GPUs look alive. Nothing here runs in production."""
