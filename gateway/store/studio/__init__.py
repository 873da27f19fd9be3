"""Studio operations records (agents contract §4): studios, their operations record and
everything under it.  Each module owns one kind of record; ``rows`` holds their typed rows."""
