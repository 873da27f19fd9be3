"""Studio operations (agents contract §4): the pure rules of studios and their operations
record -- member normalization, JSON-text fields, risk levels -- used by the stores, the console
routes and the control loop alike."""
