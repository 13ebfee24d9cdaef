"""The gRPC layer: model APIs' gRPC methods recorded where grpc's channels make their callables
(sync and ``grpc.aio``), read from the messages the client's own deserialiser made.
"""
