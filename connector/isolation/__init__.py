"""How a sandbox host wraps a command: bubblewrap by default, ``docker run`` if the policy asks."""
