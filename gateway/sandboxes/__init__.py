"""Cloud sandboxes: the host policy and available range, the task gate, settlement of charges."""
