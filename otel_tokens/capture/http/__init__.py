"""The HTTP layer: any client on httpx, requests or aiohttp that posts to a model API's wire
path is recorded by its wire format (:mod:`..wire`), unless an SDK capture above already
records the call.
"""
