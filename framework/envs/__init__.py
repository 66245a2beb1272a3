"""Environments without copies (`lake build --env NAME`): where an environment's tables live,
the pins to production it reads, and `lake diff`."""
