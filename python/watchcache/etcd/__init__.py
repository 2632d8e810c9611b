"""etcd v3 access: protos, asyncio gRPC client, watch streams, version safeguard."""
