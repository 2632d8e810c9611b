"""The resources a server serves and their write path (as Kubernetes' pkg/registry):
ResourceSpec, admission (checks and server-owned fields), patches, and ObjectStore,
which writes to etcd as compare-and-swap transactions."""
