"""A Kubernetes-style apiserver (ASGI, Starlette) over watch caches synced from etcd."""
