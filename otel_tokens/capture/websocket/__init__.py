"""Websocket sessions billed per response (OpenAI Realtime, the Agents SDK's realtime sessions,
google-genai Live): one call per billed response, under the agent of the session.
"""
