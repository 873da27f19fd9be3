"""SQL of the assistant chat (agents contract §1): one module per record kind.

Every function takes a ``Connection`` (it runs inside one ``DBRunner`` transaction) and every
user record is looked up by ``(id, user_id)``: another user's id is simply not found.  Refusals
raise ``Refused`` so the transaction rolls back and the console answers the contract's message.
"""
