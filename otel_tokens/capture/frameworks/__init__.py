"""Agent frameworks: the agent name and conversation a call is made for, read from each
framework's own run context (:mod:`.names`); the calls themselves are recorded where the
client is hooked.
"""
