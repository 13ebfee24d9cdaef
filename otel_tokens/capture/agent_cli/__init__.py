"""Agent CLIs run as subprocesses (Copilot CLI, Claude Code, Codex, Gemini CLI): the
``subprocess``/asyncio hooks (:mod:`.agent_cli_patches`, :mod:`.commands`), the model a
command line asks for (:mod:`.args`), one run as a call record (:mod:`.runs`) and the output
parsers (:mod:`.parsers`).
"""
